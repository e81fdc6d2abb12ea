import Synchronization

/// An action run once: when `tick` has been called `count` times, or at the
/// first `fire`, whichever comes first; every later call does nothing. Work
/// split over several tasks says "all of us are past this point" with it,
/// and a caller that must hear it exactly once fires it at its end.
final class Countdown: Sendable {
    private let state: Mutex<(left: Int, action: (@Sendable () -> Void)?)>

    init(_ count: Int, _ action: (@Sendable () -> Void)?) {
        state = Mutex((count, action))
    }

    /// One of the `count` calls; the last one runs the action.
    func tick() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            state.left -= 1
            guard state.left <= 0 else { return nil }
            defer { state.action = nil }
            return state.action
        }
        action?()
    }

    /// Runs the action now if it has not run.
    func fire() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            defer { state.action = nil }
            return state.action
        }
        action?()
    }
}
