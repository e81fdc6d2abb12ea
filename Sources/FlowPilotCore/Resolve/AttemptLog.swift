import Synchronization

/// What the attempts of one live request have met so far, for a caller whose
/// `--timeout` passes while the request still runs (its retries, a connect
/// that has not finished): when every attempt that ended failed before
/// reaching the backend (a name that did not resolve in time, a refused or
/// timed-out connect, a proxy that never connected) and none reached it, the
/// caller reports that failure (`unreachable`, `proxy`, `tls`: exit 69)
/// instead of a bare `timeout`. `ResolveClient.post` records each attempt
/// into the log it is handed (`attempts`), passed down rather than bound
/// to the task: a binding cost its task an allocation and every read a walk.
final class AttemptLog: Sendable {
    private struct State {
        var unavailable: ResolveFailure?
        var reached = false
        /// A caller reported the failure before the request ended (`claim`).
        var reported = false
        var finished = false
    }

    private let state = Mutex(State())

    init() {}

    /// One attempt ended: with a response (nil), or a failure.
    func record(_ failure: ResolveFailure?) {
        state.withLock { state in
            if let failure, failure.isUnavailable { state.unavailable = failure } else { state.reached = true }
        }
    }

    /// For a caller whose time is up: the failure every ended attempt met,
    /// when none reached the backend and the request has not ended; `first`
    /// is true for the first caller to ask (who counts it in `BackendReach`).
    func claim() -> (failure: ResolveFailure, first: Bool)? {
        state.withLock { state in
            guard !state.finished, !state.reached, let failure = state.unavailable else { return nil }
            defer { state.reported = true }
            return (failure, !state.reported)
        }
    }

    /// The request ended; whether a caller already reported it (`claim`).
    func finish() -> Bool {
        state.withLock { state in
            state.finished = true
            return state.reported
        }
    }
}
