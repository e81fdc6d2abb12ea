import Synchronization

enum Deadline {
    /// The task's value, or nil when `limit` passes first. The task runs on
    /// either way: a caller that times out degrades, but the work it started
    /// still lands (awaiting a task's value cannot be cancelled, so no task
    /// group here: it would wait for the loser).
    static func race<T: Sendable>(_ task: Task<T, Never>, _ limit: Duration) async -> T? {
        let once = Once()
        return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            Task {
                let value = await task.value
                if once.claim() { continuation.resume(returning: value) }
            }
            Task {
                try? await Task.sleep(for: limit)
                if once.claim() { continuation.resume(returning: nil) }
            }
        }
    }
}

/// True for the first caller of `claim()` only.
final class Once: Sendable {
    private let done = Mutex(false)

    func claim() -> Bool {
        done.withLock { done in
            defer { done = true }
            return !done
        }
    }
}
