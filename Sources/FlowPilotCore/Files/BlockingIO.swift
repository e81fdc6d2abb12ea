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
        try await pool.runIfActive(work)
    }

    /// Runs `work` on one of the pool's threads, without waiting for it.
    static func submit(_ work: @escaping @Sendable () -> Void) {
        pool.submit { _ in work() }
    }
}
