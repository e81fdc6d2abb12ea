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
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let count = max(1, min(cores * 4, items.count / max(minimumPerSlice, 1)))
        if count == 1 { return [body(items[...])] }
        let results = Mutex<[R?]>(Array(repeating: nil, count: count))
        DispatchQueue.concurrentPerform(iterations: count) { i in
            let lower = items.count * i / count
            let upper = items.count * (i + 1) / count
            let result = body(items[lower..<upper])
            results.withLock { $0[i] = result }
        }
        return results.withLock { $0.compactMap { $0 } }
    }
}
