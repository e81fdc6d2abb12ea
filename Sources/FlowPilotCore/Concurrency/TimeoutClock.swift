import Synchronization

/// Calls a closure when a time limit passes, for many limits at once with one
/// sleeping task: limits are rounded up to the next tick (`resolution`), kept
/// in a bucket per tick, and the one task wakes each tick while any are
/// pending. A limit fires at most a tick and a scheduler delay late, never
/// early, and one that is cancelled costs a removal from its bucket. warm waits for
/// two answers an identity, each with a limit, thousands a second: a sleeping
/// task per wait (a timer armed and cancelled on the dispatch manager thread)
/// cost a fifth of warm's CPU; this costs a hundred wakeups a second.
final class TimeoutClock: Sendable {
    static let shared = TimeoutClock(resolution: .milliseconds(10))

    /// What `cancel` needs to find a limit again.
    struct Token: Sendable {
        fileprivate let tick: Int64
        fileprivate let id: UInt64
    }

    private struct State {
        var buckets: [Int64: [UInt64: @Sendable () -> Void]] = [:]
        /// The buckets' ticks, ascending (an emptied bucket's tick stays until it is due).
        var ticks: [Int64] = []
        var nextID: UInt64 = 0
        var sleeping = false
    }

    let resolution: Duration
    private let origin = ContinuousClock.now
    private let state = Mutex(State())

    init(resolution: Duration) { self.resolution = resolution }

    /// Calls `fire` once `limit` has passed, unless cancelled first. `fire`
    /// runs on the clock's task: it should only hand work on (resume a
    /// continuation), not do it.
    @discardableResult
    func schedule(after limit: Duration, _ fire: @escaping @Sendable () -> Void) -> Token {
        let due = origin.duration(to: .now) + max(limit, .zero)
        // Rounded up: a limit never fires before it has passed.
        let tick = Int64((due / resolution).rounded(.up))
        let (token, wake) = state.withLock { state -> (Token, Bool) in
            state.nextID += 1
            if state.buckets[tick] == nil {
                // Limits mostly arrive in order: append, else insert in place.
                if let last = state.ticks.last, last > tick {
                    let at = state.ticks.partitioningIndex { $0 >= tick }
                    state.ticks.insert(tick, at: at)
                } else {
                    state.ticks.append(tick)
                }
            }
            state.buckets[tick, default: [:]][state.nextID] = fire
            defer { state.sleeping = true }
            return (Token(tick: tick, id: state.nextID), !state.sleeping)
        }
        // Detached on purpose: the clock's one timer loop serves every waiter of the process.
        if wake { Task.detached { await self.run() } }
        return token
    }

    /// Stops a limit from firing; nothing when it fired already.
    func cancel(_ token: Token) {
        // In place: an emptied bucket stays, like its tick, until it is due.
        state.withLock { state in _ = state.buckets[token.tick]?.removeValue(forKey: token.id) }
    }

    /// How many limits are pending (tests).
    var pending: Int { state.withLock { $0.buckets.values.reduce(0) { $0 + $1.count } } }

    /// The one sleeper: a tick at a time while anything is pending, then gone
    /// (the next `schedule` starts another).
    private func run() async {
        while true {
            try? await Task.sleep(for: resolution)
            let now = Int64((origin.duration(to: .now) / resolution).rounded(.down))
            let (due, last) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
                let count = state.ticks.partitioningIndex { $0 > now }
                var due: [@Sendable () -> Void] = []
                for tick in state.ticks[..<count] {
                    if let bucket = state.buckets.removeValue(forKey: tick) { due.append(contentsOf: bucket.values) }
                }
                state.ticks.removeFirst(count)
                if state.ticks.isEmpty { state.sleeping = false }
                return (due, !state.sleeping)
            }
            for fire in due { fire() }
            if last { return }
        }
    }
}

extension Array {
    /// The first index whose element satisfies `belongs` (false then true, in order).
    fileprivate func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var (low, high) = (0, count)
        while low < high {
            let mid = (low + high) / 2
            if belongs(self[mid]) { high = mid } else { low = mid + 1 }
        }
        return low
    }
}
