import Synchronization

/// Work shared by key while it runs: the first caller for a key claims it
/// and starts the work, callers for the same key while it runs get the same
/// value to come (and the tag the claimer gave it), and the key is forgotten
/// when its claimer releases it (Nuke's TaskPool, in miniature). Concurrent
/// resolves of one (placement, fingerprint) share a request this way, the
/// tag being the request's `AttemptLog`.
///
/// No closure crosses the pool: a claim is a value the claimer keeps and
/// hands back to `fulfil` once its work has the value, and to `release` once
/// the value's effect is visible elsewhere (a resolve's flow durable in the
/// cache), so that a caller in between joins the value instead of starting
/// the work again.
final class InflightPool<Key: Hashable & Sendable, Value: Sendable, Tag: Sendable>: Sendable {
    /// A key nobody was running: the claimer's to work on, `fulfil` and `release`, once.
    struct Claim: Sendable {
        let key: Key
        let tag: Tag
        fileprivate let generation: UInt64
        fileprivate let value: Pending<Value>
    }

    /// A key's value to come, and the tag of the work that will give it.
    struct Running: Sendable {
        let value: Pending<Value>
        let tag: Tag
        fileprivate let generation: UInt64
    }

    private let state = Mutex<(running: [Key: Running], generation: UInt64)>(([:], 0))

    /// The value to come for each key, in the order given (a key given twice
    /// counts once: both places get its value), and the claims of the keys
    /// nobody was running, in order: the caller starts their work (several
    /// claims may be worked on together, as one batch request) and
    /// `fulfil`s and `release`s each. A claimed key keeps the tag it was given here; a
    /// running key has its claimer's. Two callers never claim the same
    /// running key.
    func values(for keys: [(key: Key, tag: Tag)]) -> (running: [Running], claims: [Claim]) {
        state.withLock { state in
            var values: [Running] = []
            values.reserveCapacity(keys.count)
            var claims: [Claim] = []
            for (index, (key, tag)) in keys.enumerated() {
                // A caller gives a few keys: an earlier one is found by looking back.
                if let earlier = keys[..<index].firstIndex(where: { $0.key == key }) {
                    values.append(values[earlier])
                } else if let running = state.running[key] {
                    values.append(running)
                } else {
                    state.generation += 1
                    let running = Running(value: Pending(), tag: tag, generation: state.generation)
                    state.running[key] = running
                    values.append(running)
                    claims.append(
                        Claim(key: key, tag: running.tag, generation: running.generation, value: running.value))
                }
            }
            return (values, claims)
        }
    }

    /// The claimed key's value, given to its callers and to every caller that
    /// joins the key until it is `release`d.
    func fulfil(_ claim: Claim, _ value: Value) {
        claim.value.fulfil(value)
    }

    /// The claimed key forgotten: the next caller claims it anew.
    func release(_ claim: Claim) {
        state.withLock { state in
            if state.running[claim.key]?.generation == claim.generation { state.running[claim.key] = nil }
        }
    }

    /// How many keys are running now.
    var count: Int { state.withLock { $0.running.count } }
}
