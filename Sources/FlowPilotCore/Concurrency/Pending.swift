import Synchronization

/// A value that work running elsewhere will give (`fulfil`), for any number of
/// waiters, each with a time limit of its own. A waiter that gives up (its
/// limit passed, or its task was cancelled) leaves the work running: what it
/// produces still lands (warm's late resolves). No task is started per
/// waiter: a waiter is a continuation in an array and, with a limit, an
/// entry in `TimeoutClock`; a callback (`whenFulfilled`) needs no task either. Each continuation is resumed exactly once, by
/// whoever takes its waiter out of the state under the lock (the value, the
/// limit or the cancellation), so the unchecked kind is used: no canary
/// object made and freed for every wait.
///
/// The state sits beside a `Mutex<Void>`, not inside a `Mutex<State>`, and
/// holds the value as an array of at most one: every field's layout is then
/// the same whatever `Value` is, so the deinit (which Swift never
/// specializes) frees them with no type metadata looked up at run time. In
/// a `Mutex<State>` it looked up three each time, about 3,400 instructions
/// of a warm's identity (`docs/performance.md`). Unchecked `Sendable`: the
/// state is read and written only under `lock`.
final class Pending<Value: Sendable>: @unchecked Sendable {
    private struct Waiter {
        let continuation: UnsafeContinuation<Value?, Never>
        let timeout: TimeoutClock.Token?
    }

    /// Waiters are few (one or two callers of a key, a line's reader), so
    /// they sit in arrays searched in order: no hashing, no hash table to make.
    private struct State {
        /// The value once given: empty, or the one.
        var given: [Value] = []
        var value: Value? { given.first }
        var waiters: [(id: UInt64, waiter: Waiter)] = []
        var nextID: UInt64 = 0
        /// Waiters given an id and not yet in `waiters`.
        var registering: [UInt64] = []
        /// Those of them whose limit passed, or whose task was cancelled, already.
        var expired: [UInt64] = []
        /// Closures to call with the value (`whenFulfilled`).
        var callbacks: [@Sendable (Value) -> Void] = []

        mutating func removeWaiter(_ id: UInt64) -> Waiter? {
            guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return waiters.remove(at: index).waiter
        }
    }

    private let lock = Mutex(())
    @exclusivity(unchecked) private var state = State()

    /// `body` with the state, under `lock`.
    private func withState<T>(_ body: (inout State) -> T) -> T {
        lock.withLock { _ in body(&state) }
    }

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
        let (waiters, callbacks) = withState { state -> ([Waiter], [@Sendable (Value) -> Void]) in
            guard state.given.isEmpty else { return ([], []) }
            state.given = [value]
            defer { (state.waiters, state.callbacks) = ([], []) }
            return (state.waiters.map(\.waiter), state.callbacks)
        }
        for waiter in waiters {
            if let timeout = waiter.timeout { TimeoutClock.shared.cancel(timeout) }
            waiter.continuation.resume(returning: value)
        }
        for callback in callbacks { callback(value) }
    }

    /// Calls `body` with the value once it is given, at once when it has
    /// been: no task waits. `body` runs on the thread that gives the value,
    /// so it should only hand work on.
    func whenFulfilled(_ body: @escaping @Sendable (Value) -> Void) {
        let value = withState { state -> Value? in
            if state.value == nil { state.callbacks.append(body) }
            return state.value
        }
        if let value { body(value) }
    }

    /// The value if it has been given, without waiting.
    var valueIfFulfilled: Value? { withState { $0.value } }

    /// The value, however long it takes, even in a cancelled task.
    var value: Value {
        get async {
            while true {
                // Without a limit and without cancellation the answer is never nil.
                if let value = await wait(limit: nil, cancellable: false) { return value }
            }
        }
    }

    /// The value, or nil when `limit` passes first or the waiting task is
    /// cancelled (a warm's identities past a stop's deadline).
    func value(within limit: Duration) async -> Value? { await wait(limit: limit, cancellable: true) }

    /// The value, or nil when the waiting task is cancelled first.
    var valueUnlessCancelled: Value? {
        get async { await wait(limit: nil, cancellable: true) }
    }

    private func wait(limit: Duration?, cancellable: Bool) async -> Value? {
        if let value = withState({ $0.value }) { return value }
        if cancellable && Task.isCancelled { return nil }
        let id = withState { state in
            state.nextID += 1
            state.registering.append(state.nextID)
            return state.nextID
        }
        guard cancellable else { return await wait(id, limit: limit) }
        // A cancellation before the waiter is registered is found when it is (`expired`).
        return await withTaskCancellationHandler {
            await wait(id, limit: limit)
        } onCancel: {
            expire(id)
        }
    }

    private func wait(_ id: UInt64, limit: Duration?) async -> Value? {
        await withUnsafeContinuation { continuation in
            let timeout = limit.map { limit in
                TimeoutClock.shared.schedule(after: limit) { [self] in self.expire(id) }
            }
            let now = withState { state -> Now in
                state.registering.removeAll { $0 == id }
                if let index = state.expired.firstIndex(of: id) {
                    state.expired.remove(at: index)
                    return .expired
                }
                if let value = state.value { return .value(value) }
                state.waiters.append((id, Waiter(continuation: continuation, timeout: timeout)))
                return .later
            }
            switch now {
            case .value(let value):
                if let timeout { TimeoutClock.shared.cancel(timeout) }
                continuation.resume(returning: value)
            case .expired:
                if let timeout { TimeoutClock.shared.cancel(timeout) }
                continuation.resume(returning: nil)
            case .later: break
            }
        }
    }

    /// A waiter's limit passed, or its task was cancelled: it gets nil, unless the value came first.
    private func expire(_ id: UInt64) {
        let waiter = withState { state -> Waiter? in
            guard let waiter = state.removeWaiter(id) else {
                // Not registered yet: it finds this when it is. (Already
                // answered, by its value or the other of limit and cancellation: nothing to do.)
                if state.registering.contains(id), !state.expired.contains(id) { state.expired.append(id) }
                return nil
            }
            return waiter
        }
        guard let waiter else { return }
        if let timeout = waiter.timeout { TimeoutClock.shared.cancel(timeout) }
        waiter.continuation.resume(returning: nil)
    }
}

extension Pending {
    /// A `Pending` given `work`'s result, the work started now as a task of its own.
    static func run(_ work: @escaping @Sendable () async -> Value) -> Pending {
        let pending = Pending()
        // Unstructured on purpose: waiters come and go (each with its own limit); the work lands anyway.
        Task { pending.fulfil(await work()) }
        return pending
    }
}
