import Foundation
import Synchronization

/// One process's view of a format-2 cache's `log/`, kept between lookups so
/// that a lookup costs what its key needs, not a listing and a read of
/// every segment (docs/cache-format.md, "Reading"):
///
/// - the listing is made again only when `log/`'s modification or change
///   time moved (a segment or an index made or removed), or a second after
///   the last one (a file system whose times are coarse);
/// - each segment is opened once and kept open: segments never change but
///   by appending, and one a compaction removes stays readable, its records
///   copied into segments the next listing shows;
/// - a sealed segment's fanout is read once; a lookup reads one slice of its
///   keys and the records they lead to;
/// - a segment still being written is read as it grows: the records past
///   what was read are indexed by key in memory, once each, and a lookup
///   reads the ones of its key.
final class LogView: Sendable {
    let logDir: String
    private let state = Mutex<State>(State())

    /// `logDir` as the C string `stat` takes, made once, not at every lookup.
    private let logDirPath: [CChar]

    init(logDir: String) {
        self.logDir = logDir
        logDirPath = Array(logDir.utf8CString)
    }

    private struct State: ~Copyable {
        var segments: [String: OpenSegment] = [:]
        /// The open segments in name order, made at each listing: what every lookup walks.
        var ordered: [OpenSegment] = []
        var listedTimes: (Int, Int, Int, Int) = (-1, -1, -1, -1)
        var listedAt = ContinuousClock.now - .seconds(10)
    }

    /// A segment kept open, with what is known of it.
    final class OpenSegment: @unchecked Sendable {
        let name: String
        let fd: Int32
        /// The index's fanout (257 cumulative counts, the first 0), when sealed.
        var fanout: [UInt32]?
        var indexFD: Int32 = -1
        /// Records past what the index covers (all of an unsealed segment's), by key prefix.
        var tail: [UInt64: [Int]] = [:]
        /// How far `tail` has read.
        var readTo = LogSegment.magic.count

        init(name: String, fd: Int32) { (self.name, self.fd) = (name, fd) }

        deinit {
            close(fd)
            if indexFD >= 0 { close(indexFD) }
        }

        /// Opens the index, if it is whole enough to probe; the tail then starts where it stops.
        func seal(_ path: String) {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            var head = [UInt8](repeating: 0, count: SegmentIndex.headerSize + SegmentIndex.fanoutSize)
            guard SegmentIndex.readFully(fd, &head, at: 0), Array(head.prefix(8)) == SegmentIndex.magic else {
                close(fd)
                return
            }
            let (covered, count, fanout) = head.withUnsafeBytes { bytes in
                (
                    Int(LogRecord.load(bytes, 8, 8)), UInt32(LogRecord.load(bytes, 16, 4)),
                    [0] + (0..<256).map { UInt32(LogRecord.load(bytes, SegmentIndex.headerSize + $0 * 4, 4)) }
                )
            }
            guard fanout.last == count, zip(fanout, fanout.dropFirst()).allSatisfy({ $0 <= $1 }) else {
                close(fd)
                return
            }
            (indexFD, self.fanout) = (fd, fanout)
            tail = [:]
            readTo = max(covered, LogSegment.magic.count)
        }

        /// Indexes the records appended since the last look. A torn record
        /// (a writer appending right now) is read again next time; after a
        /// corrupt one, nothing is.
        func catchUp() {
            guard let bytes = FlowLog.read(fd, from: readTo), !bytes.isEmpty else { return }
            bytes.withUnsafeBytes { raw in
                let (keys, end) = LogRecord.keyPrefixes(raw, from: 0)
                for (offset, prefix) in keys { tail[prefix, default: []].append(readTo + offset) }
                readTo += end
            }
        }

        /// The offsets of records whose key has `prefix`.
        func offsets(of prefix: UInt64) -> [Int] {
            var found = tail[prefix] ?? []
            guard let fanout, indexFD >= 0 else { return found }
            let first = Int(prefix >> 56)
            let (start, end) = (Int(fanout[first]), Int(fanout[first + 1]))
            guard end > start else { return found }
            var slice = [UInt8](repeating: 0, count: (end - start) * SegmentIndex.entrySize)
            let at = SegmentIndex.headerSize + SegmentIndex.fanoutSize + start * SegmentIndex.entrySize
            guard SegmentIndex.readFully(indexFD, &slice, at: at) else { return found }
            slice.withUnsafeBytes { entries in
                for index in 0..<(end - start) {
                    let base = index * SegmentIndex.entrySize
                    let key = (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(entries[base + $1]) }
                    if key == prefix { found.append(Int(LogRecord.load(entries, base + 8, 4))) }
                }
            }
            return found
        }
    }

    /// Every record of `key` in the segments as this process sees them now.
    func located(of key: LogKey) -> [FlowLog.Located] {
        let segments = current()
        var found: [FlowLog.Located] = []
        for segment in segments {
            let offsets = state.withLock { _ in
                segment.catchUp()
                return segment.offsets(of: key.prefix)
            }
            for offset in offsets {
                if let record = FlowLog.record(segment.fd, at: offset), key.matches(record) {
                    found.append(FlowLog.Located(record: record, segment: segment.name, offset: offset))
                }
            }
        }
        return found
    }

    /// What this process's writer appended to `name`, bytes `start..<end`,
    /// and its records' keys (offsets from `start`): indexed as `catchUp`
    /// would index them, when the view has read the segment up to `start`
    /// (else `catchUp` reads them, as it reads another writer's).
    func appended(to name: String, from start: Int, through end: Int, keys: [(prefix: UInt64, relativeOffset: Int)]) {
        state.withLock { state in
            guard let segment = state.segments[name], segment.fanout == nil, segment.readTo == start else { return }
            for key in keys { segment.tail[key.prefix, default: []].append(start + key.relativeOffset) }
            segment.readTo = end
        }
    }

    /// The open segments, listed again when `log/` changed.
    private func current() -> [OpenSegment] {
        var info = stat()
        var times: (Int, Int, Int, Int) = (-1, -1, -1, -1)
        if stat(logDirPath, &info) == 0 {
            let (modified, changed) = Platform.times(info)
            times = (modified.0, modified.1, changed.0, changed.1)
        }
        return state.withLock { state in
            if times != state.listedTimes || ContinuousClock.now - state.listedAt > .seconds(1) {
                relist(&state, times: times)
            }
            return state.ordered
        }
    }

    private func relist(_ state: inout State, times: (Int, Int, Int, Int)) {
        let names = (DirectoryWalker.list(logDir, stat: false) ?? []).map(\.name)
        let indexes = Set(names.filter { $0.hasSuffix(LogSegment.suffix + LogSegment.indexSuffix) })
        let segmentNames = names.filter { $0.hasSuffix(LogSegment.suffix) && !$0.hasPrefix(".") }.sorted()
        var kept: [String: OpenSegment] = [:]
        for name in segmentNames {
            let sealed = indexes.contains(name + LogSegment.indexSuffix)
            if let known = state.segments[name] {
                if sealed && known.fanout == nil { known.seal("\(logDir)/\(name)\(LogSegment.indexSuffix)") }
                kept[name] = known
                continue
            }
            let fd = open("\(logDir)/\(name)", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            let segment = OpenSegment(name: name, fd: fd)
            if sealed { segment.seal("\(logDir)/\(name)\(LogSegment.indexSuffix)") }
            kept[name] = segment
        }
        state.segments = kept
        state.ordered = segmentNames.compactMap { kept[$0] }
        (state.listedTimes, state.listedAt) = (times, .now)
    }
}
