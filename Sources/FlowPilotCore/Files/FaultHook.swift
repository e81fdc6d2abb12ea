import Foundation

/// Named points where a test kills fpctl on purpose, to place a crash at an
/// exact step instead of after a random delay: with `FPCTL_FAULT=NAME` in the
/// environment, the process sends itself SIGKILL when it reaches the point
/// `NAME` (no cleanup, no handler, as a power cut or the OOM killer would).
/// Unset, each point costs one comparison with nil.
///
/// The points: `init-made-root` (a new cache's directory made, nothing in
/// it), `init-marker-written` (the marker's bytes written to a file with no
/// name yet, or a named temporary), `init-marker-synced` (those bytes synced),
/// `init-marker-named` (the marker named, its directory not yet synced).
public enum FaultHook {
    static let armed = ProcessInfo.processInfo.environment["FPCTL_FAULT"]

    /// Dies here when `FPCTL_FAULT` names this point.
    static func reach(_ point: String) {
        guard let armed, armed == point else { return }
        kill(getpid(), SIGKILL)
    }
}
