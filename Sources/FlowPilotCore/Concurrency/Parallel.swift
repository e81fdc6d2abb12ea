import Foundation
import Synchronization

/// Work spread over every core, for directory walks and hashing that would
/// otherwise leave a core idle.
public enum Parallel {
    /// `body` over `items` cut into contiguous slices (a few per core, so an
    /// uneven slice does not hold the rest back); the results come back in slice
    /// order, so the output is what one thread going through `items` would give.
    /// Fewer than `minimumPerSlice` items run on the calling thread.
    public static func mapSlices<T: Sendable, R: Sendable>(
        _ items: [T], minimumPerSlice: Int = 512, _ body: @Sendable (ArraySlice<T>) -> R
    ) -> [R] {
        mapRanges(items.count, minimumPerSlice: minimumPerSlice) { body(items[$0]) }
    }

    /// `body` over `0..<count` cut into contiguous ranges, as `mapSlices` cuts its items.
    public static func mapRanges<R: Sendable>(
        _ count: Int, minimumPerSlice: Int = 512, _ body: @Sendable (Range<Int>) -> R
    ) -> [R] {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let pieces = max(1, min(cores * 4, count / max(minimumPerSlice, 1)))
        if pieces == 1 { return [body(0..<count)] }
        let results = Mutex<[R?]>(Array(repeating: nil, count: pieces))
        DispatchQueue.concurrentPerform(iterations: pieces) { i in
            let result = body((count * i / pieces)..<(count * (i + 1) / pieces))
            results.withLock { $0[i] = result }
        }
        return results.withLock { $0.compactMap { $0 } }
    }
}
