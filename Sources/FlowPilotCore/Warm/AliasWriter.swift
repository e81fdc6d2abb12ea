import Foundation
import Synchronization

/// Points each placement's last-known-good alias at the newest entry a run
/// stored, without an alias write per entry: the first entry of a placement
/// gets its alias at once, later ones at most every `interval`, and `flush`
/// writes whatever is still pending. A run killed at any moment leaves every
/// alias it wrote pointing at a complete entry (entries are published before
/// their alias and a warm never deletes them), at most `interval` behind the
/// newest; the format's rule that the newest alias wins still holds.
final class AliasWriter: Sendable {
    private struct Placement {
        var lastWrite: ContinuousClock.Instant
        var pending: CachedFlow?
    }

    let store: CacheStore
    let interval: Duration
    private let state = Mutex<[ExactName: Placement]>([:])

    init(store: CacheStore, interval: Duration = .seconds(1)) {
        self.store = store
        self.interval = interval
    }

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
        if writeNow { try? store.pointAliasIfPresent(to: entry) }
    }

    /// Writes every alias still pending.
    func flush() {
        let pending = state.withLock { state -> [CachedFlow] in
            let entries = state.values.compactMap(\.pending)
            for key in state.keys { state[key]?.pending = nil }
            return entries
        }
        for entry in pending { try? store.pointAliasIfPresent(to: entry) }
    }
}
