import Synchronization

/// A value that work running elsewhere will give (`fulfil`), for any number of
/// waiters, each with a time limit of its own. A waiter that gives up leaves
/// the work running: what it produces still lands (warm's late resolves). No
/// task is started per waiter: a waiter is a continuation in a dictionary and,
/// with a limit, an entry in `TimeoutClock`.
final class Pending<Value: Sendable>: Sendable {
    private struct Waiter {
        let continuation: CheckedContinuation<Value?, Never>
        let timeout: TimeoutClock.Token?
    }

    private struct State {
        var value: Value?
        var waiters: [UInt64: Waiter] = [:]
        var nextID: UInt64 = 0
        /// Waiters whose limit passed before they were in `waiters`.
        var expired: Set<UInt64> = []
    }

    private let state = Mutex(State())

    /// What a new waiter finds once it is registered.
    private enum Now {
        case value(Value)
        case expired
        case later
    }

    init() {}

    /// Gives the value to every waiter, and to every later one at once. Only the
    /// first call counts.
    func fulfil(_ value: Value) {
        let waiters = state.withLock { state -> [Waiter] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters {
            if let timeout = waiter.timeout { TimeoutClock.shared.cancel(timeout) }
            waiter.continuation.resume(returning: value)
        }
    }

    /// The value, however long it takes.
    var value: Value {
        get async {
            while true {
                // Without a limit the answer is never nil.
                if let value = await wait(limit: nil) { return value }
            }
        }
    }

    /// The value, or nil when `limit` passes first.
    func value(within limit: Duration) async -> Value? { await wait(limit: limit) }

    /// Whether the value has been given.
    var isFulfilled: Bool { state.withLock { $0.value != nil } }

    private func wait(limit: Duration?) async -> Value? {
        if let value = state.withLock({ $0.value }) { return value }
        return await withCheckedContinuation { continuation in
            let id = state.withLock { state in
                state.nextID += 1
                return state.nextID
            }
            let timeout = limit.map { limit in
                TimeoutClock.shared.schedule(after: limit) { [self] in self.expire(id) }
            }
            let now = state.withLock { state -> Now in
                if let value = state.value { return .value(value) }
                if state.expired.remove(id) != nil { return .expired }
                state.waiters[id] = Waiter(continuation: continuation, timeout: timeout)
                return .later
            }
            switch now {
            case .value(let value):
                if let timeout { TimeoutClock.shared.cancel(timeout) }
                continuation.resume(returning: value)
            case .expired: continuation.resume(returning: nil)
            case .later: break
            }
        }
    }

    /// A waiter's limit passed: it gets nil, unless the value came first.
    private func expire(_ id: UInt64) {
        let waiter = state.withLock { state -> Waiter? in
            guard state.value == nil else { return nil }
            guard let waiter = state.waiters.removeValue(forKey: id) else {
                // Not registered yet: it finds this when it is.
                state.expired.insert(id)
                return nil
            }
            return waiter
        }
        waiter?.continuation.resume(returning: nil)
    }
}

extension Pending {
    /// A `Pending` given `work`'s result, the work started now as a task of its own.
    static func run(_ work: @escaping @Sendable () async -> Value) -> Pending {
        let pending = Pending()
        Task { pending.fulfil(await work()) }
        return pending
    }
}
