import Synchronization

enum Deadline {
    /// The task's value, or nil when `limit` passes first. The task runs on
    /// either way: a caller that times out degrades, but the work it started
    /// still lands (awaiting a task's value cannot be cancelled, so no task
    /// group here: it would wait for the loser). The timer is cancelled as soon
    /// as the value arrives, so a run of many fast answers keeps no sleepers.
    static func race<T: Sendable>(_ task: Task<T, Never>, _ limit: Duration) async -> T? {
        let race = Race()
        return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            race.setTimer(
                Task {
                    try? await Task.sleep(for: limit)
                    if !Task.isCancelled, race.claim() { continuation.resume(returning: nil) }
                })
            Task {
                let value = await task.value
                if race.claim() {
                    race.cancelTimer()
                    continuation.resume(returning: value)
                }
            }
        }
    }
}

/// Who finished first, and the timer to stop when the value wins.
final class Race: Sendable {
    private let state = Mutex<(done: Bool, timer: Task<Void, Never>?)>((false, nil))

    /// True for the first caller only.
    func claim() -> Bool {
        state.withLock { state in
            defer { state.done = true }
            return !state.done
        }
    }

    func setTimer(_ timer: Task<Void, Never>) {
        let cancelNow = state.withLock { state -> Bool in
            state.timer = timer
            return state.done
        }
        if cancelNow { timer.cancel() }
    }

    func cancelTimer() { state.withLock { $0.timer }?.cancel() }
}
