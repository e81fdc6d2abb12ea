import Foundation
import NIOPosix

/// Threads for file system work that blocks (cache writes: mkdir, write,
/// link, each a system call that can take a millisecond on a slow disk), so it
/// never holds one of the few threads Swift's concurrency runs on, which the
/// network's responses need. A warm at 64 requests in flight against a distant
/// backend otherwise waits for the disk between answers.
enum BlockingIO {
    /// Eight, or fewer where the process limits leave no room (`Platform.threadBudget`).
    static let threads = min(8, Platform.threadBudget())
    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        return pool
    }()

    /// Runs `work` on one of the pool's threads and returns its result.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        #if DEBUG
            try await pool.runIfActive {
                markPoolThread()
                return try work()
            }
        #else
            try await pool.runIfActive(work)
        #endif
    }

    /// Runs `work` on one of the pool's threads, without waiting for it.
    static func submit(_ work: @escaping @Sendable () -> Void) {
        #if DEBUG
            pool.submit { _ in
                markPoolThread()
                work()
            }
        #else
            pool.submit { _ in work() }
        #endif
    }

    /// Whether the calling thread is one of the pool's: what a caller that
    /// must not block any other thread (the group commit's, the event
    /// loop's) asserts before it reads the disk. Known in debug builds
    /// (every test's), where each piece of work marks its thread; a release
    /// build wraps no work for it, and says false.
    static var isPoolThread: Bool { pthread_getspecific(poolThreadKey) != nil }

    private static let poolThreadKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key for the blocking-I/O threads")
        return key
    }()

    private static func markPoolThread() {
        if pthread_getspecific(poolThreadKey) == nil {
            pthread_setspecific(poolThreadKey, UnsafeRawPointer(bitPattern: 1))
        }
    }
}
