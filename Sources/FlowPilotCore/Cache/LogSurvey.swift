import Foundation
import Synchronization

/// Which records of a format-2 cache's log a newer record of the same key
/// supersedes, found in memory that does not grow with the cache
/// (docs/cache-format.md, "Reading the whole log"), and a walk of every
/// record that says, of each, whether it is its key's survivor: what
/// `cache info`, `list`, `verify`, `prune` and compaction read.
///
/// Three passes, as git's pack indexes are read:
/// 1. **Keys.** Each sealed segment's index (checked whole first) is a table
///    of `(key prefix, offset)` sorted by prefix, with a fanout by the
///    prefix's first byte. The prefix space is cut into ranges of first
///    bytes small enough that one range's slots of every index fit in a few
///    megabytes; each range is read from every index and each prefix counted
///    (`PrefixCounts`, a table, not a sort): a prefix met once is its key's only record, so it survives without being
///    read. Records whose prefix is met more than once (a key written again,
///    or two keys whose prefixes collide) are marked in their segment's
///    `repeated` bitmap, one bit a 64-byte slot (no record is shorter), their
///    offsets kept while sparse. A segment no checked index covers (being
///    written, or its index damaged) has its keys read from its bytes and
///    sorted in memory, bounded by the segment's size.
/// 2. **Weighing.** Each segment with repeated records is read once (whole
///    and walked where they are dense, record by record where sparse), and
///    what decides between records of one key put in `WeighedBuckets` by
///    fingerprint; bucket by bucket, records are grouped by their whole key
///    and of each group the one a lookup serves survives (`FlowLog.Servable`:
///    the newest whose flow reads back whole, the newest of all when none
///    does); the others are marked superseded, one bit a slot again. (Read
///    range by range, a record at a time, ten million entries cost 4 million
///    `pread`s, most of `info`'s time.)
/// 3. **Walk.** Each segment is read once, in order, up to the length the
///    first pass saw, and each whole record handed on with its bit: a writer
///    appending meanwhile adds nothing the first pass did not weigh.
///
/// Memory: two bits per 64 bytes of log (about 6 bits an entry), one range
/// of index slots (16 bytes each, 2 MiB) and its prefix table (twice as many
/// places, 9 bytes each), one bucket (about 2 MiB and its
/// records), one segment's bytes, and the keys of segments no index covers.
struct LogSurvey {
    /// One segment as the first pass saw it.
    struct Part {
        let segment: FlowLog.Segment
        /// Its length when surveyed: the walk reads no further.
        let length: Int
        /// A bit per 64-byte slot: set where a superseded record starts.
        var superseded: [UInt64]
        /// Its writer still holds it (`LogSegment.isLive`): never rewritten or removed.
        var live = false

        func isSuperseded(_ offset: Int) -> Bool {
            let slot = offset / LogSurvey.slot
            return slot / 64 < superseded.count && superseded[slot / 64] & (1 << UInt64(slot % 64)) != 0
        }

        mutating func markSuperseded(_ offset: Int) {
            let slot = offset / LogSurvey.slot
            if slot / 64 < superseded.count { superseded[slot / 64] |= 1 << UInt64(slot % 64) }
        }

        /// A bit per slot where a record whose key prefix is met more than
        /// once starts (made on the first), and how many: the second pass
        /// weighs these.
        var repeated: [UInt64] = []
        var repeatedCount = 0
        /// Their offsets while they are sparse (one per `bytesPerWantedRecord`
        /// of the segment at most: each read alone); nil past that (the
        /// segment read whole, its records walked).
        var repeatedOffsets: [UInt32]? = []

        func isRepeated(_ offset: Int) -> Bool {
            let slot = offset / LogSurvey.slot
            return slot / 64 < repeated.count && repeated[slot / 64] & (1 << UInt64(slot % 64)) != 0
        }

        mutating func markRepeated(_ offset: Int) {
            let slot = offset / LogSurvey.slot
            if repeated.isEmpty { repeated = [UInt64](repeating: 0, count: superseded.count) }
            guard slot / 64 < repeated.count, repeated[slot / 64] & (1 << UInt64(slot % 64)) == 0 else { return }
            repeated[slot / 64] |= 1 << UInt64(slot % 64)
            repeatedCount += 1
            if repeatedCount * LogSurvey.bytesPerWantedRecord >= length {
                repeatedOffsets = nil
            } else {
                repeatedOffsets?.append(UInt32(offset))
            }
        }
    }

    /// No record is shorter (header and the smallest body), so no two start in one slot.
    static let slot = LogRecord.headerSize + LogRecord.minimumBodySize
    /// How many index slots one range of the first pass holds at most, 2 MiB.
    static let rangeSlots = 1 << 17

    /// How a scan surveys a log: not at all (`info` from a summary), by
    /// reading the records of keys written more than once (what `verify`,
    /// `prune` and compaction trust), or from the segments' facts where they
    /// answer (`list`, as `info` counts).
    enum Mode { case none, records, facts }

    var parts: [Part]
    /// Index slots one range of the first pass holds at most (tests make it small).
    let rangeSlots: Int
    /// `WeighedBuckets`' bucket and buffer sizes (tests make them small).
    let bucketBytes: Int
    let bufferBytes: Int
    /// Where their scratch file goes (nil: `TMPDIR`; tests name one that cannot be made).
    let spillDirectory: String?

    private init(parts: [Part]) {
        (self.parts, rangeSlots, bucketBytes, bufferBytes, spillDirectory) = (
            parts, Self.rangeSlots, WeighedBuckets.bucketBytes, WeighedBuckets.bufferBytes, nil
        )
    }

    /// The survey of `log` with which records a newer one of their key
    /// supersedes decided from each segment's index and facts
    /// (`FactsSurvey`: the record a lookup serves, by the facts' times and
    /// flows, by the records only where two share a millisecond or a
    /// prefix), no record of a key written more than once read; nil where
    /// the facts cannot answer. A walk reads each segment no further than
    /// its facts cover. Trusted as `info` trusts the facts: only `list`
    /// surveys by it; what removes records decides by reading them.
    static func decidedByFacts(_ log: FlowLog) -> LogSurvey? {
        guard let facts = FactsSurvey(log) else { return nil }
        let bitmaps = Mutex(facts.parts.map { [UInt64](repeating: 0, count: ($0.length / slot + 64) / 64) })
        let counted = facts.counts(at: Date()) { lost in
            bitmaps.withLock { maps in
                for (part, offset) in lost {
                    let at = Int(offset) / slot
                    if at / 64 < maps[Int(part)].count { maps[Int(part)][at / 64] |= 1 << UInt64(at % 64) }
                }
            }
        }
        guard counted != nil else { return nil }
        let maps = bitmaps.withLock { $0 }
        return LogSurvey(
            parts: facts.parts.indices.map { n in
                let part = facts.parts[n]
                return Part(
                    segment: part.segment, length: part.length, superseded: maps[n],
                    live: part.memory != nil && LogSegment.isLive(part.path))
            })
    }

    /// Surveys `log`'s segments as listed now.
    init(
        _ log: FlowLog, rangeSlots: Int = LogSurvey.rangeSlots, bucketBytes: Int = WeighedBuckets.bucketBytes,
        bufferBytes: Int = WeighedBuckets.bufferBytes, spillDirectory: String? = nil
    ) {
        parts = []
        self.rangeSlots = rangeSlots
        (self.bucketBytes, self.bufferBytes, self.spillDirectory) = (bucketBytes, bufferBytes, spillDirectory)
        var sources: [KeySource] = []
        for segment in log.segments() {
            let fd = open(segment.path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            let length = FlowLog.length(fd)
            let source = KeySource(segment, fd: fd, length: length)
            parts.append(
                Part(
                    segment: segment, length: length,
                    superseded: [UInt64](repeating: 0, count: (length / Self.slot + 64) / 64),
                    // A segment sealed with a whole index is done; any other may be a live writer's.
                    live: source.index == nil && LogSegment.isLive(segment.path)))
            sources.append(source)
        }
        markSuperseded(log, sources)
    }

    /// Where the first pass reads a segment's keys from: its index's sorted
    /// slots (and the tail past what the index covers, none when its writer
    /// sealed it), or, with no index to trust, its records' keys sorted here.
    private struct KeySource {
        /// The index's path and fanout, when it checked out whole.
        var index: (path: String, fanout: [UInt32])?
        /// Keys read from the segment's bytes, sorted by prefix.
        var keys: [(prefix: UInt64, offset: UInt32)] = []

        init(_ segment: FlowLog.Segment, fd: Int32, length: Int) {
            var from = LogSegment.magic.count
            if let path = segment.index {
                let indexFD = open(path, O_RDONLY | O_CLOEXEC)
                if indexFD >= 0 {
                    defer { close(indexFD) }
                    if let checked = SegmentIndex.checked(indexFD, segmentLength: length) {
                        index = (path, checked.fanout)
                        from = checked.covered
                    }
                }
            }
            guard length > from, let bytes = FlowLog.read(fd, from: 0) else { return }
            bytes.withUnsafeBytes { raw in
                let bounded = UnsafeRawBufferPointer(rebasing: raw[..<min(length, raw.count)])
                guard LogSegment.hasMagic(bounded) else { return }
                keys = LogRecord.keyPrefixes(bounded, from: from).keys.map { ($0.prefix, UInt32($0.offset)) }
            }
            keys.sort { ($0.prefix, $0.offset) < ($1.prefix, $1.offset) }
        }

        /// How many keys have a first byte in `bytes`.
        func count(_ bytes: Range<Int>) -> Int {
            var total = 0
            if let index { total += Int(index.fanout[bytes.upperBound] - index.fanout[bytes.lowerBound]) }
            if !keys.isEmpty { total += keyRange(bytes).count }
            return total
        }

        func keyRange(_ bytes: Range<Int>) -> Range<Int> {
            func first(_ byte: Int) -> Int {
                guard byte < 256 else { return keys.count }
                let bound = UInt64(byte) << 56
                var (low, high) = (0, keys.count)
                while low < high {
                    let mid = (low + high) / 2
                    if keys[mid].prefix < bound { low = mid + 1 } else { high = mid }
                }
                return low
            }
            return first(bytes.lowerBound)..<first(bytes.upperBound)
        }
    }

    /// The first bytes cut into ranges of as many as fit in `rangeSlots`
    /// keys (`perByte`: how many keys start with each byte), at least one
    /// byte a range: how the first pass, and `FactsSurvey`, read the keys.
    static func ranges(perByte: [Int], rangeSlots: Int) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var first = 0
        while first < 256 {
            var (last, total) = (first + 1, perByte[first])
            while last < 256 && total + perByte[last] <= rangeSlots {
                total += perByte[last]
                last += 1
            }
            ranges.append(first..<last)
            first = last
        }
        return ranges
    }

    /// What one index slot takes in the first pass's memory.
    static let slotBytes = MemoryLayout<Slot>.stride

    /// One slot of the first pass: a key prefix and where its record is.
    private struct Slot {
        let prefix: UInt64
        let part: UInt32
        let offset: UInt32
    }

    private mutating func markSuperseded(_ log: FlowLog, _ sources: [KeySource]) {
        var slots: [Slot] = []
        var repeated = PrefixCounts(capacity: 0)
        var repeatedTotal = 0
        let perByte = (0..<256).map { byte in sources.reduce(0) { $0 + $1.count(byte..<(byte + 1)) } }
        for range in Self.ranges(perByte: perByte, rangeSlots: rangeSlots) {
            let (first, last) = (range.lowerBound, range.upperBound)
            slots.removeAll(keepingCapacity: true)
            slots.reserveCapacity(perByte[range].reduce(0, +))
            for (number, source) in sources.enumerated() {
                if let index = source.index {
                    Self.readSlots(index, first..<last, part: UInt32(number), into: &slots)
                }
                for key in source.keys[source.keyRange(first..<last)] {
                    slots.append(Slot(prefix: key.prefix, part: UInt32(number), offset: key.offset))
                }
            }
            // The slots of prefixes met more than once, marked where their records are: found by counting
            // each prefix in a table (no sort; which of a key's records wins is the second pass's).
            repeated.reset(capacity: slots.count)
            for slot in slots { repeated.add(slot.prefix) }
            for slot in slots where repeated.isRepeated(slot.prefix) {
                parts[Int(slot.part)].markRepeated(Int(slot.offset))
                repeatedTotal += 1
            }
        }
        guard repeatedTotal > 0 else { return }
        var servable = FlowLog.Servable(log)
        var buckets = WeighedBuckets(
            records: repeatedTotal, bucketBytes: bucketBytes, bufferBytes: bufferBytes, directory: spillDirectory)
        do {
            // Freed before the buckets are read back.
            let segmentBytes = WholeFileBuffer()
            for number in parts.indices where parts[number].repeatedCount > 0 {
                weigh(number, into: &buckets, servable: &servable, reading: segmentBytes)
            }
        }
        let now = LogRecord.nowMillis
        buckets.forEachBucket { bytes, records in
            Self.forEachLoser(bytes, records, now: now) { loser in
                parts[Int(loser.part)].markSuperseded(Int(loser.offset))
            }
        }
    }

    /// The repeated records of part `number` (those `markRepeated` marked),
    /// read in the order of their offsets, each one's key and what decides
    /// between records of one key put in `buckets`: a segment where they are
    /// dense read whole once and walked, one where they are sparse record by
    /// record. Each is read in place (`LogRecord.View`), no string made. One
    /// that does not read whole is left out (the walk does not read it either).
    private func weigh(
        _ number: Int, into buckets: inout WeighedBuckets, servable: inout FlowLog.Servable,
        reading segmentBytes: WholeFileBuffer
    ) {
        let part = parts[number]
        let fd = open(part.segment.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        func add(_ offset: Int, _ view: LogRecord.View) {
            buckets.add(
                part: UInt32(number), offset: UInt32(offset), view,
                serves: view.kind == .alias || servable.serves(view))
        }
        if let offsets = part.repeatedOffsets {
            for offset in offsets.sorted() where Int(offset) < part.length {
                FlowLog.withRecord(fd, at: Int(offset)) { view in add(Int(offset), view) }
            }
            return
        }
        _ = segmentBytes.withBytes(of: fd) { whole in
            let raw = UnsafeRawBufferPointer(rebasing: whole.prefix(part.length))
            guard LogSegment.hasMagic(raw) else { return }
            _ = LogSegment.walk(raw) { offset, view in
                if part.isRepeated(offset) { add(offset, view) }
            }
        }
    }

    /// Of records weighed together (`WeighedBuckets`), those grouped by their
    /// whole key (kind, placement and fingerprint compared as bytes) that
    /// are not their key's survivor: the one a lookup serves (the newest
    /// whose flow reads back whole; the newest of all when none does).
    private static func forEachLoser(
        _ bytes: UnsafeRawBufferPointer, _ records: [WeighedBuckets.Record], now: Int64,
        _ body: (WeighedBuckets.Record) -> Void
    ) {
        // Sorted by the fingerprint's first 8 bytes, then each run of equal ones by the whole key: the runs are
        // a key's records and its other placements', a few, where one sort by the whole key compared every record.
        var keyed = records.indices.map { (records[$0].fingerprint.0, UInt32($0)) }
        keyed.sort { $0.0 < $1.0 }
        var start = 0
        while start < keyed.count {
            var end = start + 1
            while end < keyed.count && keyed[end].0 == keyed[start].0 { end += 1 }
            defer { start = end }
            guard end - start > 1 else { continue }
            let order = keyed[start..<end].map { Int($0.1) }.sorted {
                WeighedBuckets.keyOrder(records[$0], records[$1], in: bytes)
            }
            var at = 0
            while at < order.count {
                var best = records[order[at]]
                var last = at + 1
                while last < order.count && WeighedBuckets.sameKey(records[order[last]], best, in: bytes) {
                    let item = records[order[last]]
                    let wins =
                        item.serves != best.serves
                        ? item.serves : LogRecord.wins(item.stamp, over: best.stamp, now: now)
                    body(wins ? best : item)
                    if wins { best = item }
                    last += 1
                }
                at = last
            }
        }
    }

    /// How often each key prefix of one range occurs, once or more than
    /// once: an open-addressed table twice the range's size, probed from
    /// the prefix's low bits (a SHA-256's, so uniform). Counting is linear
    /// where sorting the range was most of the first pass.
    struct PrefixCounts {
        private var prefixes: [UInt64]
        /// 0 an empty place, 1 a prefix met once, 2 one met more than once.
        private var counts: [UInt8]
        private var mask: Int

        /// What a place takes: a prefix and its count.
        static let placeBytes = MemoryLayout<UInt64>.stride + MemoryLayout<UInt8>.stride

        /// A table for `capacity` prefixes at most, twice as many places.
        init(capacity: Int) {
            (prefixes, counts, mask) = ([], [], 0)
            reset(capacity: capacity)
        }

        /// Emptied for the next range's `capacity` prefixes: the same table,
        /// zeroed, when it has as many places (the usual case: each range
        /// holds up to `rangeSlots`), so a survey allocates it once, not
        /// once a range (2 MiB, mapped and faulted in anew each time).
        mutating func reset(capacity: Int) {
            var places = 16
            while places < capacity * 2 { places *= 2 }
            if places == prefixes.count {
                counts.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
            } else {
                prefixes = []
                prefixes = [UInt64](repeating: 0, count: places)
                counts = []
                counts = [UInt8](repeating: 0, count: places)
            }
            mask = places - 1
        }

        mutating func add(_ prefix: UInt64) {
            let at = place(prefix)
            counts[at] = counts[at] == 0 ? 1 : 2
            prefixes[at] = prefix
        }

        /// Where `prefix` is, or the empty place it would take.
        private func place(_ prefix: UInt64) -> Int {
            var at = Int(truncatingIfNeeded: prefix) & mask
            while counts[at] != 0 && prefixes[at] != prefix { at = (at + 1) & mask }
            return at
        }

        func isRepeated(_ prefix: UInt64) -> Bool { counts[place(prefix)] == 2 }
    }

    /// A segment is read whole to weigh its records when it holds at least
    /// one for every this many bytes (a page), else record by record.
    static let bytesPerWantedRecord = 4096

    /// The slots of an index whose prefix's first byte is in `bytes`, read in 64 KiB pieces.
    private static func readSlots(
        _ index: (path: String, fanout: [UInt32]), _ bytes: Range<Int>, part: UInt32, into slots: inout [Slot]
    ) {
        let (from, to) = (Int(index.fanout[bytes.lowerBound]), Int(index.fanout[bytes.upperBound]))
        guard to > from else { return }
        let fd = open(index.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let perRead = (64 << 10) / SegmentIndex.entrySize
        // As many bytes as the range's slots, no more: a large cache reads each index once a range
        // (77 ranges of 1,007 indexes at ten million), a few KiB each time, not a 64 KiB piece.
        var buffer = [UInt8](repeating: 0, count: min(perRead, to - from) * SegmentIndex.entrySize)
        var at = from
        while at < to {
            let count = min(perRead, to - at)
            let want = count * SegmentIndex.entrySize
            let base = SegmentIndex.headerSize + SegmentIndex.fanoutSize + at * SegmentIndex.entrySize
            if buffer.count != want { buffer = [UInt8](repeating: 0, count: want) }
            guard SegmentIndex.readUpTo(fd, &buffer, at: base) >= want else { return }
            buffer.withUnsafeBytes { raw in
                for n in 0..<count {
                    let entry = n * SegmentIndex.entrySize
                    let prefix = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: entry, as: UInt64.self))
                    slots.append(Slot(prefix: prefix, part: part, offset: UInt32(LogRecord.load(raw, entry + 8, 4))))
                }
            }
            at += count
        }
    }
}
