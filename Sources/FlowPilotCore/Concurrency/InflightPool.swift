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
///
/// A caller that looked elsewhere first (the cache) and found nothing can
/// still come after the release: its look missed the effect, the key is no
/// longer running, and it would start the work a second time. So a caller
/// reads `epoch` before it looks, and gives it to `values(for:since:)`: a
/// key released since then is not claimed: the caller is given no value
/// for it (nil), looks again (its effect is there now), and comes back. Which keys were released is
/// remembered in `releaseSlots` places by hash, each holding its latest
/// release's number, so the memory is fixed (32 KiB); two keys sharing a
/// place cost a needless second look, never a second start.
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

    /// How many places remember releases by key hash.
    static var releaseSlots: Int { 4096 }

    private struct State {
        var running: [Key: Running] = [:]
        var generation: UInt64 = 0
        /// `released[slot]`: the number of the latest release of a key hashed there.
        var released = [UInt64](repeating: 0, count: InflightPool.releaseSlots)
    }

    private let state = Mutex(State())
    /// Releases so far, counted under `state`'s lock and read without it.
    private let releases = Atomic<UInt64>(0)

    /// The releases so far: read before looking for a key's effect, given to `values(for:since:)`.
    var epoch: UInt64 { releases.load(ordering: .acquiring) }

    /// Where a key's releases are remembered.
    static func slot(_ key: Key) -> Int { key.hashValue & (releaseSlots - 1) }

    /// The value to come for each key, in the order given (a key given twice
    /// counts once: both places get its value), and the claims of the keys
    /// nobody was running, in order: the caller starts their work (several
    /// claims may be worked on together, as one batch request) and
    /// `fulfil`s and `release`s each. A claimed key keeps the tag it was given here; a
    /// running key has its claimer's. Two callers never claim the same
    /// running key.
    ///
    /// With `since` (an `epoch` read before the caller looked for the keys'
    /// effects), when a key nobody is running may have been released since,
    /// no key of the call is claimed: each key nobody is running gets no
    /// value (its place in `running` is nil), the caller looks them up
    /// again and comes back with a new `epoch`, so keys meant to be claimed
    /// together (one batch request) are never split by a recheck.
    func values(for keys: [(key: Key, tag: Tag)], since: UInt64? = nil) -> (running: [Running?], claims: [Claim]) {
        state.withLock { state in
            var values: [Running?] = []
            values.reserveCapacity(keys.count)
            var claims: [Claim] = []
            claims.reserveCapacity(keys.count)
            let recheck =
                since.map { since in
                    releases.load(ordering: .relaxed) > since
                        && keys.contains { state.running[$0.key] == nil && state.released[Self.slot($0.key)] > since }
                } ?? false
            for (index, (key, tag)) in keys.enumerated() {
                // A caller gives a few keys: an earlier one is found by looking back.
                if let earlier = keys[..<index].firstIndex(where: { $0.key == key }) {
                    values.append(values[earlier])
                } else if let running = state.running[key] {
                    values.append(running)
                } else if recheck {
                    values.append(nil)
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
            let number = releases.add(1, ordering: .releasing).newValue
            state.released[Self.slot(claim.key)] = number
        }
    }

    /// How many keys are running now.
    var count: Int { state.withLock { $0.running.count } }
}
