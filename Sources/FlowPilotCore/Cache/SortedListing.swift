import Foundation

/// Entries put in a listing's order (`CacheScan.listed`) in memory that does
/// not grow with their number, as sort(1) does: up to `runLength` are held
/// encoded and sorted in memory; past that each full batch is sorted and written as a run to
/// one unlinked temporary file (in `TMPDIR`, else /tmp), and the runs are
/// merged at the end, each read through a small buffer. A listing of ten
/// million entries so holds one batch and a buffer a run, not ten million.
struct SortedListing {
    /// Entries sorted in memory at once (each about 250 bytes, encoded).
    let runLength: Int
    /// The batch, each entry encoded as a run holds it, one after another.
    private var bytes: [UInt8] = []
    /// Each entry of the batch: where it starts, and what orders it first.
    private var keys: [Key] = []
    /// The batch's placements, numbered as they came; by their bytes (two spellings are two placements).
    private var placements: [ExactName: Int32] = [:]
    private var spill: Int32 = -1
    private var written = 0
    private var runs: [Range<Int>] = []

    /// What sorts an entry before its strings are compared: its placement's
    /// rank in the batch, its time, the first 8 hex digits of its
    /// fingerprint (whose bytes sort as the digits do).
    private struct Key {
        var rank: Int32
        let start: Int32
        let time: Double
        let fingerprint: UInt64
    }

    /// Entries sorted in memory at once by default.
    static let defaultRunLength = 16_384

    /// Where runs are written unless given: Foundation's temporary directory (`TMPDIR`, else /tmp).
    let directory: String

    init(runLength: Int = defaultRunLength, directory: String? = nil) {
        self.runLength = runLength
        self.directory =
            directory ?? FileManager.default.temporaryDirectory.path
    }

    mutating func add(_ entry: CachedFlow) throws {
        var digits: UInt64 = 0
        for byte in entry.fingerprint.utf8.prefix(8) { digits = digits << 8 | UInt64(byte) }
        keys.append(
            Key(
                rank: rank(entry.placement), start: Int32(bytes.count), time: entry.resolvedAt.timeIntervalSince1970,
                fingerprint: digits))
        Self.encode(entry, into: &bytes)
        if keys.count >= runLength { try writeRun() }
    }

    /// A format-2 entry as its record's bytes and where it is, read in
    /// place: its `CachedFlow` is made once, when it is handed on, not
    /// once to be held and again to be read back.
    mutating func add(_ view: LogRecord.View, segment: String, offset: Int) throws {
        let number: Int32
        if let last = lastSegment, segments[Int(last)].sameBytes(as: segment) {
            number = last
        } else if let known = segmentNumbers[segment] {
            number = known
        } else {
            number = Int32(segments.count)
            segmentNumbers[segment] = number
            segments.append(segment)
        }
        lastSegment = number
        // The first 8 hex digits of the fingerprint, as `add(_: CachedFlow)` takes them from its text.
        var digits: UInt64 = 0
        for byte in view.fingerprint.prefix(4) {
            digits = digits << 16 | UInt64(Digest.digit(byte >> 4)) << 8 | UInt64(Digest.digit(byte & 0xF))
        }
        keys.append(
            Key(
                rank: rank(recent.name(view.placement)), start: Int32(bytes.count),
                time: LogRecord.date(millis: view.resolvedAtMillis).timeIntervalSince1970, fingerprint: digits))
        let start = bytes.count
        bytes.append(contentsOf: [0, 0, 0, 0, Self.recordTag])
        LogRecord.append(UInt64(UInt32(number)), 4, to: &bytes)
        LogRecord.append(UInt64(offset), 8, to: &bytes)
        bytes.append(contentsOf: view.body)
        LogRecord.store(UInt64(bytes.count - start - 4), 4, at: start, in: &bytes)
        if keys.count >= runLength { try writeRun() }
    }

    /// The batch's number of a placement.
    private mutating func rank(_ placement: String) -> Int32 {
        let name = ExactName(placement)
        if let ordinal = placements[name] { return ordinal }
        let ordinal = Int32(placements.count)
        placements[name] = ordinal
        return ordinal
    }

    /// The segments whose records the listing holds, numbered as they came (a few thousand at most).
    private var segments: [String] = []
    private var segmentNumbers: [String: Int32] = [:]
    private var lastSegment: Int32?
    private var recent = CacheScan.RecentNames()

    /// The first byte of an entry held as its record (`add(_:segment:offset:)`)
    /// or as its fields (`encode`).
    private static let recordTag: UInt8 = 1
    private static let fieldsTag: UInt8 = 0

    /// The batch's entries in order: by the keys, then, where they tie, as `CacheScan.listed` says.
    private mutating func sortBatch() {
        let names = placements.sorted { $0.key < $1.key }
        var rank = [Int32](repeating: 0, count: names.count)
        for (position, name) in names.enumerated() { rank[Int(name.value)] = Int32(position) }
        for index in keys.indices { keys[index].rank = rank[Int(keys[index].rank)] }
        bytes.withUnsafeBytes { raw in
            keys.sort { a, b in
                if (a.rank, a.time, a.fingerprint) != (b.rank, b.time, b.fingerprint) {
                    return (a.rank, a.time, a.fingerprint) < (b.rank, b.time, b.fingerprint)
                }
                guard let x = Self.entry(raw, at: Int(a.start), segments: segments),
                    let y = Self.entry(raw, at: Int(b.start), segments: segments)
                else {
                    return a.start < b.start
                }
                return CacheScan.listed(x, y)
            }
        }
    }

    /// Hands every entry added to `body`, in order, and removes the runs.
    mutating func finish(_ body: (CachedFlow) throws -> Void) throws {
        defer {
            if spill >= 0 { close(spill) }
            spill = -1
        }
        guard spill >= 0 else {
            sortBatch()
            let (keys, bytes) = (self.keys, self.bytes)
            try bytes.withUnsafeBytes { raw in
                for key in keys {
                    guard let entry = Self.entry(raw, at: Int(key.start), segments: segments) else { continue }
                    try body(entry)
                }
            }
            return
        }
        try writeRun()
        // The runs' buffers together about 4 MiB, each from 4 KiB to 32 KiB.
        let buffer = min(32 << 10, max(4 << 10, (4 << 20) / runs.count))
        var cursors = runs.map { Cursor(fd: spill, range: $0, buffer: buffer, segments: segments) }
        var heap: [Int] = []
        func less(_ a: Int, _ b: Int) -> Bool {
            guard let x = cursors[a].current, let y = cursors[b].current else { return false }
            // Equal entries leave in the order of their runs: the merge is stable, as one sort is.
            return CacheScan.listed(x, y) || (!CacheScan.listed(y, x) && a < b)
        }
        func siftDown(_ start: Int) {
            var parent = start
            while true {
                let (left, right) = (2 * parent + 1, 2 * parent + 2)
                var smallest = parent
                if left < heap.count && less(heap[left], heap[smallest]) { smallest = left }
                if right < heap.count && less(heap[right], heap[smallest]) { smallest = right }
                if smallest == parent { return }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
        for index in cursors.indices {
            try cursors[index].advance()
            if cursors[index].current != nil { heap.append(index) }
        }
        for start in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(start) }
        while let top = heap.first, let entry = cursors[top].current {
            try body(entry)
            try cursors[top].advance()
            if cursors[top].current == nil {
                heap[0] = heap[heap.count - 1]
                heap.removeLast()
            }
            if !heap.isEmpty { siftDown(0) }
        }
    }

    private mutating func writeRun() throws {
        guard !keys.isEmpty else { return }
        if spill < 0 { spill = try ScratchFile.open(in: directory) }
        sortBatch()
        var out: [UInt8] = []
        out.reserveCapacity(1 << 20)
        let start = written
        for key in keys {
            let from = Int(key.start)
            let length = bytes.withUnsafeBytes { 4 + Int(LogRecord.load($0, from, 4)) }
            out.append(contentsOf: bytes[from..<(from + length)])
            if out.count >= 1 << 20 { try flush(&out) }
        }
        try flush(&out)
        runs.append(start..<written)
        keys.removeAll(keepingCapacity: true)
        bytes.removeAll(keepingCapacity: true)
        placements.removeAll(keepingCapacity: true)
    }

    /// The entry encoded at `start` of a batch.
    private static func entry(_ raw: UnsafeRawBufferPointer, at start: Int, segments: [String]) -> CachedFlow? {
        let length = Int(LogRecord.load(raw, start, 4))
        return decode(UnsafeRawBufferPointer(rebasing: raw[(start + 4)..<(start + 4 + length)]), segments: segments)
    }

    /// Appends `out` to the runs' file (written in order from its start; the
    /// merge reads it with `pread`, which moves no offset).
    private mutating func flush(_ out: inout [UInt8]) throws {
        if let failure = out.withUnsafeBytes({ writeAll(spill, $0) }) {
            throw FPError.cannotWrite("a listing's temporary file: \(Errno.describe(failure))")
        }
        written += out.count
        out.removeAll(keepingCapacity: true)
    }

    // An entry as a run holds it: u32 length, the fields tag, then its fields.
    private static func encode(_ e: CachedFlow, into out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: [0, 0, 0, 0, fieldsTag])
        for text in [e.placement, e.fingerprint, e.userID ?? "", e.flowID, e.version, e.path, e.flowSHA256 ?? ""] {
            LogRecord.append(UInt64(text.utf8.count), 4, to: &out)
            out.append(contentsOf: text.utf8)
        }
        out.append((e.userID == nil ? 0 : 1) | (e.flowSHA256 == nil ? 0 : 2) | (e.inLog ? 4 : 0))
        LogRecord.append(e.resolvedAt.timeIntervalSince1970.bitPattern, 8, to: &out)
        LogRecord.append(UInt64(bitPattern: Int64(e.ttlSeconds)), 8, to: &out)
        LogRecord.append(UInt64(bitPattern: e.size), 8, to: &out)
        LogRecord.store(UInt64(out.count - start - 4), 4, at: start, in: &out)
    }

    private static func decode(_ bytes: UnsafeRawBufferPointer, segments: [String]) -> CachedFlow? {
        if bytes.first == recordTag {
            guard bytes.count > 13, let view = LogRecord.View(UnsafeRawBufferPointer(rebasing: bytes[13...])) else {
                return nil
            }
            let segment = Int(LogRecord.load(bytes, 1, 4))
            guard segment < segments.count else { return nil }
            return CacheStore.cachedFlow(view, path: "\(segments[segment])#\(LogRecord.load(bytes, 5, 8))")
        }
        guard bytes.first == fieldsTag else { return nil }
        var at = 1
        var texts: [String] = []
        for _ in 0..<7 {
            guard at + 4 <= bytes.count else { return nil }
            let count = Int(LogRecord.load(bytes, at, 4))
            at += 4
            guard at + count <= bytes.count else { return nil }
            texts.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[at..<(at + count)]), as: UTF8.self))
            at += count
        }
        guard at + 25 == bytes.count else { return nil }
        let flags = bytes[at]
        let resolved = Double(bitPattern: LogRecord.load(bytes, at + 1, 8))
        let ttl = Int64(bitPattern: LogRecord.load(bytes, at + 9, 8))
        let size = Int64(bitPattern: LogRecord.load(bytes, at + 17, 8))
        return CachedFlow(
            placement: texts[0], fingerprint: texts[1], userID: flags & 1 != 0 ? texts[2] : nil, flowID: texts[3],
            version: texts[4], resolvedAt: Date(timeIntervalSince1970: resolved), ttlSeconds: Int(ttl), size: size,
            path: texts[5], inLog: flags & 4 != 0, flowSHA256: flags & 2 != 0 ? texts[6] : nil)
    }

    /// One run read back through a small buffer.
    private struct Cursor {
        let fd: Int32
        var next: Int
        let end: Int
        /// How much a read takes at least.
        let chunk: Int
        var buffer: [UInt8] = []
        var used = 0
        private(set) var current: CachedFlow?
        let segments: [String]

        init(fd: Int32, range: Range<Int>, buffer: Int, segments: [String]) {
            (self.fd, next, end, chunk, self.segments) = (fd, range.lowerBound, range.upperBound, buffer, segments)
        }

        mutating func advance() throws {
            current = nil
            guard let length = try take(4).map({ $0.withUnsafeBytes { Int(LogRecord.load($0, 0, 4)) } }) else {
                return
            }
            guard let body = try take(length),
                let entry = body.withUnsafeBytes({ SortedListing.decode($0, segments: segments) })
            else {
                throw FPError.cannotWrite("a listing's temporary file reads back damaged")
            }
            current = entry
        }

        /// The next `count` bytes of the run, nil at its end.
        private mutating func take(_ count: Int) throws -> ArraySlice<UInt8>? {
            if buffer.count - used < count {
                // The unread bytes kept, and at least a chunk more read after them.
                let room = min(max(chunk, count), end - next)
                var tail = [UInt8](repeating: 0, count: room)
                let got = room > 0 ? SegmentIndex.readUpTo(fd, &tail, at: next) : 0
                next += got
                (buffer, used) = (Array(buffer[used...]) + tail.prefix(got), 0)
            }
            guard buffer.count - used >= count else {
                if buffer.count == used && next >= end { return nil }
                throw FPError.cannotWrite("a listing's temporary file ends early")
            }
            defer { used += count }
            return buffer[used..<(used + count)]
        }
    }
}
