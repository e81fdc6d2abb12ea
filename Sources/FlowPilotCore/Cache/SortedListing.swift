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
    /// What a run is written through, 1 MiB at a time, kept from run to run.
    private var runBuffer: [UInt8] = []

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
        // Records of a few placements come in runs, or alternate: the batch's latest placements and their ranks
        // are compared by bytes before any string is made or hashed.
        let placementRank: Int32
        if let known = recentRanks.first(where: { $0.name.sameBytes(as: view.placement) }) {
            placementRank = known.rank
        } else {
            let name = String(decoding: view.placement, as: UTF8.self)
            placementRank = rank(name)
            if recentRanks.count >= 8 { recentRanks.removeFirst() }
            recentRanks.append((name, placementRank))
        }
        keys.append(
            Key(
                rank: placementRank, start: Int32(bytes.count),
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
    /// The latest placements met and their ranks in the batch, up to 8 (none once a run is written: ranks
    /// start again).
    private var recentRanks: [(name: String, rank: Int32)] = []

    /// The first byte of an entry held as its record (`add(_:segment:offset:)`)
    /// or as its fields (`encode`).
    static let recordTag: UInt8 = 1
    private static let fieldsTag: UInt8 = 0

    /// The batch's entries in order: by the keys, then, where they tie, as `CacheScan.listed` says.
    private mutating func sortBatch() {
        let names = placements.sorted { $0.key < $1.key }
        var rank = [Int32](repeating: 0, count: names.count)
        for (position, name) in names.enumerated() { rank[Int(name.value)] = Int32(position) }
        for index in keys.indices { keys[index].rank = rank[Int(keys[index].rank)] }
        bytes.withUnsafeBytes { raw in
            keys.sort { a, b in
                // Field by field, each compared once (two tuple comparisons compared each twice).
                if a.rank != b.rank { return a.rank < b.rank }
                if a.time != b.time { return a.time < b.time }
                // bytes-lint: the fingerprint's first 8 hex digits as an integer, not an identity's text.
                if a.fingerprint != b.fingerprint { return a.fingerprint < b.fingerprint }
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
        try finish(batch: 4_096) { batch in
            for index in 0..<batch.count {
                if let entry = batch.entry(index) { try body(entry) }
            }
        }
    }

    /// Hands every entry added to `body`, in order, `batch` at a time still
    /// encoded (`ListedBatch`: a caller makes their strings where it renders
    /// them, on other cores), and removes the runs. The runs are merged by
    /// comparing their records' bytes (`Cursor.compare`): no string is made here.
    mutating func finish(batch size: Int, _ body: (ListedBatch) throws -> Void) throws {
        defer {
            if spill >= 0 { close(spill) }
            spill = -1
        }
        let segments = self.segments
        var batch = ListedBatch(segments: segments, entries: size)
        func hand(_ encoded: UnsafeRawBufferPointer) throws {
            batch.append(encoded)
            guard batch.count >= size else { return }
            let room = batch.byteCount + batch.byteCount / 8
            try body(batch)
            batch = ListedBatch(segments: segments, capacity: room, entries: size)
        }
        guard spill >= 0 else {
            sortBatch()
            let (keys, bytes) = (self.keys, self.bytes)
            try bytes.withUnsafeBytes { raw in
                for key in keys {
                    let start = Int(key.start)
                    let length = Int(LogRecord.load(raw, start, 4))
                    try hand(UnsafeRawBufferPointer(rebasing: raw[(start + 4)..<(start + 4 + length)]))
                }
            }
            if batch.count > 0 { try body(batch) }
            return
        }
        try writeRun()
        // The runs' buffers together about 4 MiB, each from 4 KiB to 32 KiB.
        let buffer = min(32 << 10, max(4 << 10, (4 << 20) / runs.count))
        let cursors = runs.map { Cursor(fd: spill, range: $0, buffer: buffer, segments: segments) }
        var heap: [Int] = []
        func less(_ a: Int, _ b: Int) -> Bool {
            // Equal entries leave in the order of their runs: the merge is stable, as one sort is.
            let order = cursors[a].compare(cursors[b])
            return order < 0 || (order == 0 && a < b)
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
            if cursors[index].hasCurrent { heap.append(index) }
        }
        for start in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(start) }
        while let top = heap.first, cursors[top].hasCurrent {
            try cursors[top].current.withUnsafeBytes { try hand($0) }
            try cursors[top].advance()
            if !cursors[top].hasCurrent {
                heap[0] = heap[heap.count - 1]
                heap.removeLast()
            }
            if !heap.isEmpty { siftDown(0) }
        }
        if batch.count > 0 { try body(batch) }
    }

    private mutating func writeRun() throws {
        guard !keys.isEmpty else { return }
        if spill < 0 { spill = try ScratchFile.open(in: directory) }
        sortBatch()
        var out = runBuffer
        runBuffer = []
        defer { runBuffer = out }
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
        recentRanks.removeAll(keepingCapacity: true)
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

    static func decode(_ bytes: UnsafeRawBufferPointer, segments: [String]) -> CachedFlow? {
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

    /// One run read back through a small buffer, its current entry's bytes
    /// and what orders it (`compare`) read once, as it is reached.
    private final class Cursor {
        let fd: Int32
        var next: Int
        let end: Int
        /// How much a read takes at least.
        let chunk: Int
        var buffer: [UInt8] = []
        var used = 0
        /// The current entry, encoded (its tag first), where the buffer holds
        /// it (no copy); empty past the run's end.
        private(set) var current: ArraySlice<UInt8> = []
        var hasCurrent: Bool { !current.isEmpty }
        /// Where its record's fields are in `current`, and its time: a
        /// listing's order (`CacheScan.listed`) read from bytes. An entry held
        /// by its fields (format 1) is compared as the entry it decodes to.
        private var time: Int64 = 0
        private var placement = 0..<0
        private var fingerprint = 0..<0
        private var userID = 0..<0
        private var fields: CachedFlow?
        let segments: [String]

        init(fd: Int32, range: Range<Int>, buffer: Int, segments: [String]) {
            (self.fd, next, end, chunk, self.segments) = (fd, range.lowerBound, range.upperBound, buffer, segments)
        }

        func advance() throws {
            current = []
            guard let length = try take(4).map({ $0.withUnsafeBytes { Int(LogRecord.load($0, 0, 4)) } }) else {
                return
            }
            guard let body = try take(length), !body.isEmpty else {
                throw FPError.cannotWrite("a listing's temporary file reads back damaged")
            }
            current = body
            let read: Bool = current.withUnsafeBytes { raw in
                fields = nil
                if raw[0] == SortedListing.recordTag {
                    guard raw.count > 13, let view = LogRecord.View(UnsafeRawBufferPointer(rebasing: raw[13...]))
                    else { return false }
                    func range(_ part: UnsafeRawBufferPointer) -> Range<Int> {
                        guard let from = part.baseAddress, let base = raw.baseAddress else { return 0..<0 }
                        return (from - base)..<(from - base + part.count)
                    }
                    (time, placement) = (view.resolvedAtMillis, range(view.placement))
                    (fingerprint, userID) = (range(view.fingerprint), range(view.userID))
                    return true
                }
                fields = SortedListing.decode(raw, segments: segments)
                return fields != nil
            }
            guard read else { throw FPError.cannotWrite("a listing's temporary file reads back damaged") }
        }

        /// Below zero when this entry is listed before `other`'s, zero when
        /// neither is before the other, as `CacheScan.listed` says: by
        /// placement's bytes, time, fingerprint (its bytes sort as its hex
        /// digits), user id's bytes.
        func compare(_ other: Cursor) -> Int {
            if fields != nil || other.fields != nil {
                guard let a = fields ?? other.decoded(self), let b = other.fields ?? decoded(other) else { return 0 }
                return CacheScan.listed(a, b) ? -1 : CacheScan.listed(b, a) ? 1 : 0
            }
            return current.withUnsafeBytes { x in
                other.current.withUnsafeBytes { y in
                    func bytes(_ a: Range<Int>, _ b: Range<Int>) -> Int {
                        let common = min(a.count, b.count)
                        if common > 0, let left = x.baseAddress, let right = y.baseAddress {
                            let order = memcmp(left + a.lowerBound, right + b.lowerBound, common)
                            if order != 0 { return Int(order) }
                        }
                        return a.count - b.count
                    }
                    let byPlacement = bytes(placement, other.placement)
                    if byPlacement != 0 { return byPlacement }
                    if time != other.time { return time < other.time ? -1 : 1 }
                    let byFingerprint = bytes(fingerprint, other.fingerprint)
                    if byFingerprint != 0 { return byFingerprint }
                    return bytes(userID, other.userID)
                }
            }
        }

        /// `cursor`'s current entry made whole (to compare with one held by its fields).
        private func decoded(_ cursor: Cursor) -> CachedFlow? {
            cursor.current.withUnsafeBytes { SortedListing.decode($0, segments: segments) }
        }

        /// The next `count` bytes of the run, nil at its end.
        private func take(_ count: Int) throws -> ArraySlice<UInt8>? {
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

/// Entries of a listing, in order, still encoded as `SortedListing` holds
/// them (a format-2 entry as its record's bytes and where it is): made on the
/// thread that sorts, made into `CachedFlow`s where they are rendered.
public struct ListedBatch: Sendable {
    private var bytes: [UInt8] = []
    private var ends: [Int32] = []
    /// The segments the records name, by number.
    private let segments: [String]

    /// `capacity`: the bytes to hold room for (the last batch's, a listing's
    /// batches being alike), so a batch is one allocation, not a run of
    /// doublings whose leftovers glibc keeps.
    init(segments: [String], capacity: Int = 1 << 20, entries: Int = 0) {
        self.segments = segments
        bytes.reserveCapacity(capacity)
        ends.reserveCapacity(entries)
    }

    public var count: Int { ends.count }

    /// The bytes its entries take.
    var byteCount: Int { bytes.count }

    mutating func append(_ encoded: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: encoded)
        ends.append(Int32(bytes.count))
    }

    /// Entry `index`, its strings made; nil if its bytes do not decode.
    public func entry(_ index: Int) -> CachedFlow? {
        let start = index == 0 ? 0 : Int(ends[index - 1])
        return bytes.withUnsafeBytes {
            SortedListing.decode(UnsafeRawBufferPointer(rebasing: $0[start..<Int(ends[index])]), segments: segments)
        }
    }

    /// `body` of entry `index`'s fields where its record's bytes are (a
    /// format-2 entry), no string made: what `entry` would make of them.
    /// Nil for an entry held by its fields (format 1, or bytes that do not
    /// read back): `entry` gives that one.
    public func withFields<R>(_ index: Int, _ body: (ListedFields) -> R) -> R? {
        let start = index == 0 ? 0 : Int(ends[index - 1])
        return bytes.withUnsafeBytes { raw -> R? in
            let encoded = UnsafeRawBufferPointer(rebasing: raw[start..<Int(ends[index])])
            guard encoded.count > 13, encoded[0] == SortedListing.recordTag,
                let view = LogRecord.View(UnsafeRawBufferPointer(rebasing: encoded[13...]))
            else { return nil }
            return body(
                ListedFields(
                    placement: view.placement, userID: view.userID, flowID: view.flowID,
                    version: view.slice(view.versionRange), fingerprint: view.fingerprint,
                    resolvedAt: LogRecord.date(millis: view.resolvedAtMillis), ttlSeconds: Int(view.ttlSeconds),
                    size: Int64(view.flowSize)))
        }
    }
}

/// A format-2 entry's fields as its record holds them (`ListedBatch.withFields`),
/// valid only inside the call: its texts as their UTF-8 bytes (checked), its
/// fingerprint as 32 bytes.
public struct ListedFields: ResolvedWithTTL {
    public let placement: UnsafeRawBufferPointer
    public let userID: UnsafeRawBufferPointer
    public let flowID: UnsafeRawBufferPointer
    public let version: UnsafeRawBufferPointer
    public let fingerprint: UnsafeRawBufferPointer
    public let resolvedAt: Date
    public let ttlSeconds: Int
    /// The flow's size as the writer stored it (`flow_size`).
    public let size: Int64
}
