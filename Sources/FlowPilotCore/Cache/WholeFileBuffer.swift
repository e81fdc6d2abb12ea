import Foundation

/// Memory a walk reuses to hold one file whole at a time (each segment of
/// the log, each index), grown to the largest file met and never given back
/// until the walk ends. A fresh array per file made glibc's allocator raise
/// its mmap threshold to the 4 MiB of a segment, after which those buffers
/// came from the heap and what they left behind stayed resident: `cache
/// list` of 100,000 entries peaked 14 to 17 MiB above the same at 1,000
/// (CacheMemoryTests). Not shared between threads.
final class WholeFileBuffer {
    private var storage = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// How much it holds now: the largest file read so far.
    var capacity: Int { storage.count }

    /// What it holds once it holds anything: the longest segment a writer
    /// rolls (`LogSegment.rollBytes` and its last record, at most
    /// `LogRecord.maxBodySize` and a header), so a walk of segments of mixed
    /// lengths allocates once. Only pages read into are resident.
    static let initialCapacity = LogSegment.rollBytes + LogRecord.maxBodySize + LogRecord.headerSize

    deinit { storage.deallocate() }

    /// `body` with the bytes of `fd` from `offset` to its end (as `fstat`
    /// says now, never a listing's size), read into this buffer; nil when the
    /// file cannot be read. The bytes are valid during the call only.
    func withBytes<R>(of fd: Int32, from offset: Int = 0, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows
        -> R?
    {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        let want = max(0, Int(info.st_size) - offset)
        if want > storage.count {
            storage.deallocate()
            // Room at once for any segment a writer rolls (its pages count only once read into), so a
            // walk allocates once; past that, a quarter more than asked.
            storage = .allocate(
                byteCount: want <= Self.initialCapacity ? Self.initialCapacity : want + want / 4, alignment: 16)
        }
        let count = SegmentIndex.readUpTo(fd, UnsafeMutableRawBufferPointer(rebasing: storage[0..<want]), at: offset)
        return try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }
}
