import Foundation
import Synchronization

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
///
/// `FPCTL_PAUSE=NAME` instead stops the process (SIGSTOP) the first time it
/// reaches `NAME`, so that a test can run another command at exactly that
/// step and then let it go on (SIGCONT): `format-1-decided` (a writer that
/// opened the cache as format 1 has decided to write an entry as format 1,
/// and takes the lock next).
public enum FaultHook {
    static let armed = ProcessInfo.processInfo.environment["FPCTL_FAULT"]
    static let pausing = ProcessInfo.processInfo.environment["FPCTL_PAUSE"]
    private static let paused = Atomic<Bool>(false)

    /// Dies here when `FPCTL_FAULT` names this point; stops here once when `FPCTL_PAUSE` does.
    static func reach(_ point: String) {
        if let pausing, pausing == point, !paused.exchange(true, ordering: .relaxed) { raise(SIGSTOP) }
        guard let armed, armed == point else { return }
        kill(getpid(), SIGKILL)
    }
}
