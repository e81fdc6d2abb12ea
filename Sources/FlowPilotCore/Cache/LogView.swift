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
/// - a sealed segment's index is checked whole once (its length, its CRC,
///   the segment still as long as it covers) and its fanout kept; a lookup
///   reads one slice of its keys and the records they lead to. An index that
///   fails the check is not used: the segment is read whole, as an unsealed
///   one is;
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
        /// The index, when sealed and checked whole.
        var index: SegmentIndex.Checked?
        var indexFD: Int32 = -1
        /// Records past what the index covers (all of an unsealed segment's), by key prefix.
        var tail: [UInt64: [Int]] = [:]
        /// How far `tail` has read.
        var readTo = LogSegment.magic.count
        /// The segment's length when `tail` last read it: a segment changes
        /// only by growing, so at the same length there is nothing new (a
        /// torn or damaged tail is not read again at every lookup).
        var seenLength = -1
        /// This process's writer appends to it and tells the view each time
        /// (`appended`), which keeps `tail` at its end: no `fstat` at a lookup.
        var writtenHere = false

        init(name: String, fd: Int32) { (self.name, self.fd) = (name, fd) }

        deinit {
            close(fd)
            if indexFD >= 0 { close(indexFD) }
        }

        /// Opens the index, if it checks out whole against the segment
        /// (`SegmentIndex.checked`); the tail then starts where it stops.
        /// Otherwise the segment is read whole, as an unsealed one is.
        func seal(_ path: String) {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            guard let index = SegmentIndex.checked(fd, segmentLength: FlowLog.length(self.fd)) else {
                close(fd)
                return
            }
            (indexFD, self.index) = (fd, index)
            tail = [:]
            (readTo, seenLength) = (index.covered, -1)
        }

        /// Indexes the records appended since the last look. A torn record
        /// (a writer appending right now) is read again next time; after a
        /// corrupt one, nothing is.
        ///
        /// Two kinds of segment are not looked at again: one this process
        /// writes (`writtenHere`: its writer tells the view what it appended),
        /// and a sealed one whose tail past its index was read once (a writer
        /// seals a segment when it has appended its last record; a compaction
        /// or merge writes a segment whole, then seals it).
        func catchUp() {
            if writtenHere || (index != nil && seenLength >= 0) { return }
            let length = FlowLog.length(fd)
            guard length != seenLength else { return }
            seenLength = length
            guard length > readTo, let bytes = FlowLog.read(fd, from: readTo, to: length), !bytes.isEmpty else {
                return
            }
            bytes.withUnsafeBytes { raw in
                let (keys, end) = LogRecord.keyPrefixes(raw, from: 0)
                for (offset, prefix) in keys { tail[prefix, default: []].append(readTo + offset) }
                readTo += end
            }
        }

        /// The offsets of records whose key has `prefix`.
        func offsets(of prefix: UInt64) -> [Int] {
            let found = tail[prefix] ?? []
            guard let index, indexFD >= 0 else { return found }
            return found + SegmentIndex.offsets(indexFD, index, prefix: prefix)
        }
    }

    /// Every record of `key` in the segments as this process sees them now.
    func located(of key: LogKey) -> [FlowLog.Located] { located(of: [key])[0] }

    /// Every record of each key, from one look at `log/` and at each
    /// segment's length: an identity's placements looked up together.
    func located(of keys: [LogKey]) -> [[FlowLog.Located]] {
        let segments = current()
        var found = [[FlowLog.Located]](repeating: [], count: keys.count)
        for segment in segments {
            let offsets = state.withLock { _ in
                segment.catchUp()
                return keys.map { segment.offsets(of: $0.prefix) }
            }
            for (n, key) in keys.enumerated() {
                for offset in offsets[n] {
                    if let record = FlowLog.record(segment.fd, at: offset), key.matches(record) {
                        found[n].append(FlowLog.Located(record: record, segment: segment.name, offset: offset))
                    }
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
            guard let segment = state.segments[name], segment.index == nil, segment.readTo == start else { return }
            for key in keys { segment.tail[key.prefix, default: []].append(start + key.relativeOffset) }
            (segment.readTo, segment.seenLength, segment.writtenHere) = (end, end, true)
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
                if sealed && known.index == nil { known.seal("\(logDir)/\(name)\(LogSegment.indexSuffix)") }
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
