import Synchronization

/// At most `limit` holders at once; the others wait in arrival order. Used to
/// bound concurrent media downloads. Waiting is not cancellable: media work is
/// never cancelled, it finishes or fails on its own timeout.
final class AsyncLimiter: Sendable {
    private let state: Mutex<(free: Int, waiters: [CheckedContinuation<Void, Never>])>

    init(limit: Int) {
        state = Mutex((max(1, limit), []))
    }

    /// Runs `body` holding one of the slots.
    func run<T: Sendable>(_ body: @Sendable () async -> T) async -> T {
        await acquire()
        defer { release() }
        return await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
