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
        let pieces = slices(count, minimumPerSlice: minimumPerSlice)
        if pieces == 1 { return [body(0..<count)] }
        let results = Mutex<[R?]>(Array(repeating: nil, count: pieces))
        DispatchQueue.concurrentPerform(iterations: pieces) { i in
            let result = body((count * i / pieces)..<(count * (i + 1) / pieces))
            results.withLock { $0[i] = result }
        }
        return results.withLock { $0.compactMap { $0 } }
    }

    /// `body` over `0..<count` cut as `mapRanges` cuts it, each range with
    /// its slice's number (0 up, in order), for a caller that keeps what a
    /// slice makes in a place of its own (`SliceBuffers`) instead of
    /// returning it. How many slices there were.
    /// At most `atMost` slices (the places the caller keeps: `SliceBuffers.count`).
    public static func forEachRange(
        _ count: Int, minimumPerSlice: Int = 512, atMost: Int = maximumSlices,
        _ body: @Sendable (_ slice: Int, Range<Int>) -> Void
    ) -> Int {
        let pieces = max(1, min(atMost, slices(count, minimumPerSlice: minimumPerSlice)))
        if pieces == 1 {
            body(0, 0..<count)
        } else {
            DispatchQueue.concurrentPerform(iterations: pieces) { i in
                body(i, (count * i / pieces)..<(count * (i + 1) / pieces))
            }
        }
        return pieces
    }

    /// Slices a run over `count` items is cut into: a few per core, at least `minimumPerSlice` items each.
    static func slices(_ count: Int, minimumPerSlice: Int) -> Int {
        max(1, min(maximumSlices, count / max(minimumPerSlice, 1)))
    }

    /// The most slices a run is cut into: four a core.
    public static var maximumSlices: Int { ProcessInfo.processInfo.activeProcessorCount * 4 }
}

/// One byte buffer a slice of `Parallel.forEachRange`, kept from one run to
/// the next: what each slice renders is written into memory it already has,
/// not into a new array a slice a run (arrays made on several threads come
/// from several of glibc's arenas, each keeping what was freed in it).
/// Slice `i` is used by one thread at a time, as `forEachRange` hands it out.
public final class SliceBuffers: @unchecked Sendable {
    public let count: Int
    private let buffers: UnsafeMutablePointer<[UInt8]>

    public init(count: Int = Parallel.maximumSlices) {
        self.count = count
        buffers = .allocate(capacity: count)
        buffers.initialize(repeating: [], count: count)
    }

    deinit {
        buffers.deinitialize(count: count)
        buffers.deallocate()
    }

    /// `body` with slice `i`'s buffer emptied (its capacity kept).
    public func withEmptied<R>(_ i: Int, _ body: (inout [UInt8]) throws -> R) rethrows -> R {
        buffers[i].removeAll(keepingCapacity: true)
        return try body(&buffers[i])
    }

    /// `body` with slice `i`'s bytes as the last run left them.
    public func withBytes<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try buffers[i].withUnsafeBytes(body)
    }
}
