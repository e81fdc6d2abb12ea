enum Deadline {
    /// The task's value, or nil when `limit` passes first. The task runs on
    /// either way: a caller that times out degrades, but the work it started
    /// still lands (awaiting a task's value cannot be cancelled, so no task
    /// group here: it would wait for the loser). The limit is one entry in
    /// `TimeoutClock`, removed when the value arrives.
    static func race<T: Sendable>(_ task: Task<T, Never>, _ limit: Duration) async -> T? {
        await Pending.run { await task.value }.value(within: limit)
    }
}
