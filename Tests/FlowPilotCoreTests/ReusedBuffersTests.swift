import Foundation
import Synchronization
import Testing

@testable import FlowPilotCore

/// The buffers a whole-cache walk keeps from one file or batch to the next
/// (CacheMemoryTests measures what they are for: flat peak memory).
@Suite("buffers a walk reuses")
struct ReusedBuffersTests {
    @Test("one buffer reads files of every length whole, from any offset, and is allocated once for segments")
    func wholeFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("whole-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var generator = SystemRandomNumberGenerator()
        let buffer = WholeFileBuffer()
        // A full segment, an empty file, a short one, one a writer's last record made longer than rolling.
        let lengths = [LogSegment.rollBytes + 400, 0, 1_000, LogSegment.rollBytes + LogRecord.maxBodySize]
        var capacities: [Int] = []
        for (number, length) in lengths.enumerated() {
            var bytes = [UInt8](repeating: 0, count: length)
            bytes.withUnsafeMutableBytes { raw in
                for word in stride(from: 0, to: raw.count, by: 8) {
                    withUnsafeBytes(of: generator.next() as UInt64) { random in
                        for i in 0..<min(8, raw.count - word) { raw[word + i] = random[i] }
                    }
                }
            }
            let path = "\(dir)/\(number)"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            for offset in [0, min(length, 8), length] {
                let read = buffer.withBytes(of: fd, from: offset) { Array($0) }
                #expect(read == Array(bytes[offset...]), "file \(number), from \(offset)")
            }
            capacities.append(buffer.capacity)
        }
        #expect(Set(capacities) == [WholeFileBuffer.initialCapacity], "one allocation for every segment a writer rolls")
        let longer = "\(dir)/longer"
        try Data(count: WholeFileBuffer.initialCapacity + 1).write(to: URL(fileURLWithPath: longer))
        let fd = open(longer, O_RDONLY)
        defer { close(fd) }
        #expect(buffer.withBytes(of: fd) { $0.count } == WholeFileBuffer.initialCapacity + 1)
        #expect(buffer.capacity > WholeFileBuffer.initialCapacity)
        #expect(buffer.withBytes(of: -1) { $0.count } == nil, "a descriptor that cannot be read")
    }

    @Test("forEachRange covers every index once, each slice numbered in order of its range")
    func slices() {
        for count in [0, 1, 255, 256, 4_096, 10_007] {
            let seen = Mutex<[Int: Range<Int>]>([:])
            let pieces = Parallel.forEachRange(count, minimumPerSlice: 256) { slice, range in
                seen.withLock { $0[slice] = range }
            }
            let ranges = seen.withLock { $0 }
            #expect(pieces == ranges.count && pieces <= Parallel.maximumSlices)
            let ordered = (0..<pieces).compactMap { ranges[$0] }
            #expect(ordered.flatMap { Array($0) } == Array(0..<count), "count \(count)")
        }
        // No more slices than the caller has places for.
        let seen = Mutex<Set<Int>>([])
        let pieces = Parallel.forEachRange(10_000, minimumPerSlice: 1, atMost: 3) { slice, _ in
            _ = seen.withLock { $0.insert(slice) }
        }
        #expect(pieces == min(3, Parallel.maximumSlices) && seen.withLock { $0 } == Set(0..<pieces))
    }

    @Test("a slice's buffer is emptied for each run and keeps its capacity")
    func sliceBuffers() {
        let buffers = SliceBuffers(count: 2)
        buffers.withEmptied(1) { $0.append(contentsOf: [UInt8](repeating: 7, count: 100_000)) }
        let capacity = buffers.withEmptied(1) { out in
            out.append(1)
            return out.capacity
        }
        #expect(capacity >= 100_000, "the first run's room kept")
        #expect(buffers.withBytes(1) { Array($0) } == [1])
        #expect(buffers.withBytes(0) { $0.count } == 0)
    }

    @Test("the mmap threshold docs/performance.md states lies below what a walk allocates once")
    func threshold() throws {
        #expect(Platform.mmapThreshold < WholeFileBuffer.initialCapacity, "a segment's buffer is mapped, once")
        let table = LogSurvey.rangeSlots * 2 * LogSurvey.PrefixCounts.placeBytes
        #expect(Platform.mmapThreshold < table, "the survey's prefix table is mapped, once")
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        let page = try String(contentsOf: url.appendingPathComponent("docs/performance.md"), encoding: .utf8)
            .replacingOccurrences(of: "\n", with: " ")
        #expect(page.contains("hold glibc's threshold at \(Platform.mmapThreshold >> 20) MiB"))
    }
}
