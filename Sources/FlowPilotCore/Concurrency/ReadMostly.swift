import Foundation

/// A value many threads read at once and few write, behind a POSIX
/// read-write lock: readers share it and never wait for one another, where a
/// `Mutex` makes each wait for the one before (warm's blocking-I/O threads
/// each ask, for every identity, whether the flow's object is known durable:
/// a `Mutex` there was contended on most asks, `docs/performance.md`). A
/// writer waits for the readers in flight and holds everyone else out.
final class ReadMostly<Value: Sendable>: @unchecked Sendable {
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
    /// Read only under the lock's read side, written only under its write side.
    private var value: Value

    init(_ value: Value) {
        self.value = value
        lock.initialize(to: pthread_rwlock_t())
        precondition(pthread_rwlock_init(lock, nil) == 0, "no read-write lock")
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// `body` of the value, beside any other readers.
    func read<T>(_ body: (Value) throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(value)
    }

    /// `body` changing the value, alone.
    func write<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(&value)
    }
}
