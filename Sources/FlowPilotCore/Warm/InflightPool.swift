import Synchronization

/// Work shared by key while it runs: the first caller for a key starts it,
/// callers for the same key while it runs get the same value to come, and
/// the key is forgotten when its value is delivered (Nuke's TaskPool, in
/// miniature). Concurrent resolves of one (placement, fingerprint) share a
/// request this way.
final class InflightPool<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Running {
        let generation: UInt64
        let value: Pending<Value>
    }

    private let state = Mutex<(running: [Key: Running], generation: UInt64)>(([:], 0))

    /// The values to come for `keys`: running ones as they are. The keys not
    /// running are handed to `start` (once, under the pool's lock, so two
    /// callers never start the same key; it should only start tasks), with
    /// `deliver`, which the work it starts must call once for each of them:
    /// several keys may be worked on together (one batch request) and
    /// delivered one by one or at once.
    func values(
        for keys: [Key], start: (_ missing: [Key], _ deliver: @escaping @Sendable (Key, Value) -> Void) -> Void
    ) -> [Key: Pending<Value>] {
        state.withLock { state in
            var values: [Key: Pending<Value>] = [:]
            var started: [Key: Running] = [:]
            var missing: [Key] = []
            for key in keys {
                if let running = state.running[key] ?? started[key] {
                    values[key] = running.value
                } else {
                    state.generation += 1
                    let running = Running(generation: state.generation, value: Pending())
                    started[key] = running
                    values[key] = running.value
                    missing.append(key)
                }
            }
            guard !missing.isEmpty else { return values }
            state.running.merge(started) { _, new in new }
            start(missing) { [started] key, value in
                guard let running = started[key] else { return }
                self.forget(key, running.generation)
                running.value.fulfil(value)
            }
            return values
        }
    }

    /// How many keys are running now.
    var count: Int { state.withLock { $0.running.count } }

    private func forget(_ key: Key, _ generation: UInt64) {
        state.withLock { state in
            if state.running[key]?.generation == generation { state.running[key] = nil }
        }
    }
}
