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
    private let state = Mutex<[String: Placement]>([:])

    init(store: CacheStore, interval: Duration = .seconds(1)) {
        self.store = store
        self.interval = interval
    }

    /// `entry` was stored: its alias now, or with the next write for its placement.
    func stored(_ entry: CachedFlow) {
        let now = ContinuousClock.now
        let writeNow = state.withLock { state -> Bool in
            if let placement = state[entry.placement], now - placement.lastWrite < interval {
                if placement.pending.map({ $0.resolvedAt <= entry.resolvedAt }) ?? true {
                    state[entry.placement]?.pending = entry
                }
                return false
            }
            state[entry.placement] = Placement(lastWrite: now, pending: nil)
            return true
        }
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
