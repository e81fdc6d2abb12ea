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
    private let state = Mutex<[ExactName: Placement]>([:])
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
        func update(_ placement: inout Placement?) -> Bool {
            if let current = placement, now - current.lastWrite < interval {
                if current.pending.map({ $0.resolvedAt <= entry.resolvedAt }) ?? true { placement?.pending = entry }
                return false
            }
            placement = Placement(lastWrite: now, pending: nil)
            return true
        }
        let writeNow = state.withLock { update(&$0[ExactName(entry.placement)]) }
        if writeNow { queue.async { [write] in write(entry) } }
    }

    /// Writes every alias still pending, after those already handed to `queue`.
    func flush() {
        settle()
        let pending = state.withLock { state -> [CachedFlow] in
            let entries = state.values.compactMap(\.pending)
            for key in state.keys { state[key]?.pending = nil }
            return entries
        }
        for entry in pending { write(entry) }
    }
}
