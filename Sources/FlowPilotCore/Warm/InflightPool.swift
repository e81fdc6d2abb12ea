import Synchronization

/// Work shared by key while it runs: the first caller for a key starts it,
/// callers for the same key while it runs get the same task, and the key is
/// forgotten when the work ends (Nuke's TaskPool, in miniature). Concurrent
/// resolves of one (placement, fingerprint) share a request this way.
final class InflightPool<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Running {
        let generation: UInt64
        let value: Pending<Value>
    }

    private let state = Mutex<(running: [Key: Running], generation: UInt64)>(([:], 0))

    /// The values to come for `keys`: running ones as they are; for the keys
    /// not running, `start` gives the work to run, each as a task of its own
    /// (called once, with those keys, under the pool's lock, so two callers
    /// never start the same key).
    func tasks(
        for keys: [Key], start: ([Key]) -> [Key: @Sendable () async -> Value]
    ) -> [Key: Pending<Value>] {
        state.withLock { state in
            var values: [Key: Pending<Value>] = [:]
            var missing: [Key] = []
            for key in keys {
                if let running = state.running[key] { values[key] = running.value } else { missing.append(key) }
            }
            guard !missing.isEmpty else { return values }
            for (key, work) in start(missing) {
                state.generation += 1
                let generation = state.generation
                let value = Pending<Value>.run {
                    let value = await work()
                    self.forget(key, generation)
                    return value
                }
                state.running[key] = Running(generation: generation, value: value)
                values[key] = value
            }
            return values
        }
    }

    /// The value to come for one key: the running one's, or a new one of `work`.
    func task(for key: Key, work: @escaping @Sendable () async -> Value) -> Pending<Value> {
        // `tasks` gives every key a value: the running one's, or one of `work`.
        tasks(for: [key]) { _ in [key: work] }[key] ?? Pending.run(work)
    }

    /// How many keys are running now.
    var count: Int { state.withLock { $0.running.count } }

    private func forget(_ key: Key, _ generation: UInt64) {
        state.withLock { state in
            if state.running[key]?.generation == generation { state.running[key] = nil }
        }
    }
}
