import Foundation
import Synchronization

/// Points each placement's last-known-good alias at the newest entry a run
/// stored, without an alias write per entry: the first entry of a placement
/// gets its alias at once, later ones at most every `interval`, and `flush`
/// writes whatever is still pending. A run killed at any moment leaves every
/// alias it wrote pointing at a complete entry (entries are published before
/// their alias and a warm never deletes them), at most `interval` behind the
/// newest; the format's rule that the newest alias wins still holds.
///
/// `stored` is called where an entry becomes durable, which for a warm is
/// the group commit's thread, whose callbacks must not block: an alias
/// write (a record appended and synced, or a file published) goes to the
/// writer's own serial queue (`queue`), in the order asked, and `settle`
/// waits for those handed to it. `flush`, at the end of a run, writes on
/// the caller's thread after them.
final class AliasWriter: Sendable {
    private struct Placement {
        var lastWrite: ContinuousClock.Instant
        var pending: CachedFlow?
    }

    let interval: Duration
    private let state = Mutex(Placements())

    /// Each placement's state, found by its name's bytes: a warm's few
    /// placements by looking through them (a hash of the name cost more), a
    /// table once there are many.
    private struct Placements {
        var names: [String] = []
        var states: [Placement] = []
        var numbered: [ExactName: Int] = [:]
        static let looked = 8

        func position(of name: String) -> Int? {
            if names.count <= Self.looked { return names.firstIndex { $0.sameBytes(as: name) } }
            return numbered[ExactName(name)]
        }

        mutating func add(_ name: String, _ placement: Placement) {
            names.append(name)
            states.append(placement)
            if names.count == Self.looked + 1 {
                for (n, known) in names.enumerated() { numbered[ExactName(known)] = n }
            } else if names.count > Self.looked + 1 {
                numbered[ExactName(name)] = names.count - 1
            }
        }
    }
    /// Where an alias is written: the store's `pointAliasIfPresent` (tests watch it).
    private let write: @Sendable (CachedFlow) -> Void
    /// The alias writes handed on by `stored`, one at a time, in order.
    let queue = DispatchQueue(label: "fpctl.alias-writer")

    init(store: CacheStore, interval: Duration = .seconds(1)) {
        self.interval = interval
        self.write = { try? store.pointAliasIfPresent(to: $0) }
    }

    /// With `write` in place of the store's (tests).
    init(interval: Duration, write: @escaping @Sendable (CachedFlow) -> Void) {
        (self.interval, self.write) = (interval, write)
    }

    /// Waits for every alias write `stored` has handed to `queue` so far.
    func settle() { queue.sync {} }

    /// `entry` was stored: its alias now, or with the next write for its placement.
    func stored(_ entry: CachedFlow) {
        let now = ContinuousClock.now
        // The placement's state changed where it is: one lookup.
        let writeNow = state.withLock { placements -> Bool in
            guard let at = placements.position(of: entry.placement) else {
                placements.add(entry.placement, Placement(lastWrite: now, pending: nil))
                return true
            }
            guard now - placements.states[at].lastWrite >= interval else {
                if placements.states[at].pending.map({ $0.resolvedAt <= entry.resolvedAt }) ?? true {
                    placements.states[at].pending = entry
                }
                return false
            }
            placements.states[at] = Placement(lastWrite: now, pending: nil)
            return true
        }
        if writeNow { queue.async { [write] in write(entry) } }
    }

    /// Writes every alias still pending, after those already handed to `queue`.
    func flush() {
        settle()
        let pending = state.withLock { placements -> [CachedFlow] in
            let entries = placements.states.compactMap(\.pending)
            for at in placements.states.indices { placements.states[at].pending = nil }
            return entries
        }
        for entry in pending { write(entry) }
    }
}
