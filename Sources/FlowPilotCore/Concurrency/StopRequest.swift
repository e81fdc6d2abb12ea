import Synchronization

/// A request to end a run early and cleanly (fpctl's SIGTERM and SIGINT):
/// whoever runs the work registers what to do with `onRequest`, whoever
/// catches the signal calls `request`. Once requested it stays requested; a
/// handler registered after that runs at once.
public final class StopRequest: Sendable {
    private struct State {
        var requested = false
        var handlers: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())

    public init() {}

    public var isRequested: Bool { state.withLock { $0.requested } }

    /// Asks the work to stop; the second and later calls do nothing.
    public func request() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.requested else { return [] }
            state.requested = true
            defer { state.handlers = [] }
            return state.handlers
        }
        for handler in handlers { handler() }
    }

    /// Runs `handler` when a stop is requested (now, if it was already).
    public func onRequest(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.requested { return true }
            state.handlers.append(handler)
            return false
        }
        if now { handler() }
    }
}
