import Foundation

/// Which records of a format-2 cache's log a newer record of the same key
/// supersedes, found in memory that does not grow with the cache
/// (docs/cache-format.md, "Reading the whole log"), and a walk of every
/// record that says, of each, whether it is its key's survivor: what
/// `cache info`, `list`, `verify`, `prune` and compaction read.
///
/// Two passes, as git's pack indexes are read:
/// 1. **Keys.** Each sealed segment's index (checked whole first) is a table
///    of `(key prefix, offset)` sorted by prefix, with a fanout by the
///    prefix's first byte. The prefix space is cut into ranges of first
///    bytes small enough that one range's slots of every index fit in a few
///    megabytes; each range is read from every index, sorted, and walked: a
///    prefix met once is its key's only record, so it survives without being
///    read. Records whose prefix is met more than once (a key written again,
///    or two keys whose prefixes collide) are read (in the order of their
///    segments and offsets, so the reads go forward), grouped by their whole
///    key, and of each group the one a lookup serves survives
///    (`FlowLog.Servable`: the newest whose flow reads back whole, the newest
///    of all when none does); the others are marked superseded in their
///    segment's bitmap, one bit a 64-byte slot (no record is shorter). A
///    segment no checked index covers (being written, or its index damaged)
///    has its keys read from its bytes and sorted in memory, bounded by the
///    segment's size.
/// 2. **Walk.** Each segment is read once, in order, up to the length the
///    first pass saw, and each whole record handed on with its bit: a writer
///    appending meanwhile adds nothing the first pass did not weigh.
///
/// Memory: a bit per 64 bytes of log (about 3 bits an entry), one range of
/// index slots (16 bytes each, 2 MiB) and what deciding its repeated
/// prefixes needs (about 70 bytes a record), one segment's bytes, and the
/// keys of segments no index covers.
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
    }

    /// No record is shorter (header and the smallest body), so no two start in one slot.
    static let slot = LogRecord.headerSize + LogRecord.minimumBodySize
    /// How many index slots one range of the first pass holds at most, 2 MiB.
    static let rangeSlots = 1 << 17

    var parts: [Part]
    /// Index slots one range of the first pass holds at most (tests make it small).
    let rangeSlots: Int

    /// Surveys `log`'s segments as listed now.
    init(_ log: FlowLog, rangeSlots: Int = LogSurvey.rangeSlots) {
        parts = []
        self.rangeSlots = rangeSlots
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

    /// What one index slot takes in the first pass's memory.
    static let slotBytes = MemoryLayout<Slot>.stride

    /// One slot of the first pass: a key prefix and where its record is.
    private struct Slot {
        let prefix: UInt64
        let part: UInt32
        let offset: UInt32
    }

    private mutating func markSuperseded(_ log: FlowLog, _ sources: [KeySource]) {
        var servable = FlowLog.Servable(log)
        var first = 0
        var slots: [Slot] = []
        while first < 256 {
            // As many first bytes as fit in one range (at least one).
            var last = first + 1
            var total = sources.reduce(0) { $0 + $1.count(first..<last) }
            while last < 256 {
                let more = sources.reduce(0) { $0 + $1.count(last..<(last + 1)) }
                if total + more > rangeSlots { break }
                total += more
                last += 1
            }
            slots.removeAll(keepingCapacity: true)
            slots.reserveCapacity(total)
            for (number, source) in sources.enumerated() {
                if let index = source.index {
                    Self.readSlots(index, first..<last, part: UInt32(number), into: &slots)
                }
                for key in source.keys[source.keyRange(first..<last)] {
                    slots.append(Slot(prefix: key.prefix, part: UInt32(number), offset: key.offset))
                }
            }
            slots.sort { ($0.prefix, $0.part, $0.offset) < ($1.prefix, $1.part, $1.offset) }
            // The slots of prefixes met more than once, and where each group of them starts and ends.
            var repeated: [Slot] = []
            var groups: [Range<Int>] = []
            var start = 0
            while start < slots.count {
                var end = start + 1
                while end < slots.count && slots[end].prefix == slots[start].prefix { end += 1 }
                if end - start > 1 {
                    groups.append(repeated.count..<(repeated.count + end - start))
                    repeated += slots[start..<end]
                }
                start = end
            }
            let weighed = weigh(repeated, servable: &servable)
            for group in groups { settle(group, repeated, weighed) }
            first = last
        }
    }

    /// What deciding between records of one prefix needs of each, without
    /// its strings but the placement (a short one is held inline).
    private struct Weighed {
        let kind: LogRecord.Kind
        let placement: String
        /// The fingerprint's 32 bytes (zero for an alias, whose key is its placement).
        let fingerprint: (UInt64, UInt64, UInt64, UInt64)
        let stamp: (Int64, UInt64)
        let serves: Bool

        func sameKey(_ other: Weighed) -> Bool {
            // bytes-lint: the fingerprint is four integers, compared as its bytes.
            kind == other.kind && fingerprint == other.fingerprint && placement.sameBytes(as: other.placement)
        }
    }

    /// The records `repeated` names, read in the order of their segments
    /// and offsets (one segment open at a time, each read forward), not in
    /// the order of their keys, which jumps between segments: a segment where
    /// they are dense read whole once, one where they are sparse record by record. Each is
    /// read in place (`LogRecord.View`): no string made but its placement,
    /// once for a run of one placement. Nil for one that does not read whole
    /// (the walk does not read it either).
    private func weigh(_ repeated: [Slot], servable: inout FlowLog.Servable) -> [Weighed?] {
        var weighed = [Weighed?](repeating: nil, count: repeated.count)
        let order = repeated.indices.sorted {
            (repeated[$0].part, repeated[$0].offset) < (repeated[$1].part, repeated[$1].offset)
        }
        var placements = CacheScan.RecentNames()
        func weigh(_ index: Int, _ view: LogRecord.View) {
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            if view.kind == .entry {
                // Big-endian words of the 32 bytes: compared only for equality.
                let raw = view.fingerprint
                words = (
                    raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                    raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                    raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
                    raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
                )
            }
            weighed[index] = Weighed(
                kind: view.kind, placement: placements.name(view.placement), fingerprint: words, stamp: view.stamp,
                serves: view.kind == .alias || servable.serves(view))
        }
        var at = 0
        while at < order.count {
            let part = repeated[order[at]].part
            var end = at + 1
            while end < order.count && repeated[order[end]].part == part { end += 1 }
            defer { at = end }
            let length = parts[Int(part)].length
            let fd = open(parts[Int(part)].segment.path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            // Whole when the records wanted are dense enough that reading every page costs no more than
            // reading theirs: a segment of a large cache has few of one range's repeated keys, and is met
            // once a range (reading each whole every range was quadratic: 77 ranges x 500 segments at 10M).
            if (end - at) * Self.bytesPerWantedRecord >= length, var bytes = FlowLog.read(fd, from: 0) {
                if bytes.count > length { bytes.removeLast(bytes.count - length) }
                bytes.withUnsafeBytes { raw in
                    for index in order[at..<end] {
                        let offset = Int(repeated[index].offset)
                        guard offset < raw.count, case .record(let view, _) = LogRecord.decode(raw, at: offset) else {
                            continue
                        }
                        weigh(index, view)
                    }
                }
            } else {
                for index in order[at..<end] {
                    let offset = Int(repeated[index].offset)
                    guard offset < length else { continue }
                    FlowLog.withRecord(fd, at: offset) { view in weigh(index, view) }
                }
            }
        }
        return weighed
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
                    let prefix = (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(raw[entry + $1]) }
                    slots.append(Slot(prefix: prefix, part: part, offset: UInt32(LogRecord.load(raw, entry + 8, 4))))
                }
            }
            at += count
        }
    }

    /// Records sharing a prefix, grouped by their whole key (placement and
    /// fingerprint compared as bytes): all but each key's survivor (the one
    /// a lookup serves) marked superseded.
    private mutating func settle(_ group: Range<Int>, _ repeated: [Slot], _ weighed: [Weighed?]) {
        let now = LogRecord.nowMillis
        var best: [Int] = []
        for index in group {
            guard let item = weighed[index] else { continue }
            if let known = best.firstIndex(where: { weighed[$0]?.sameKey(item) == true }),
                let other = weighed[best[known]]
            {
                let wins =
                    item.serves != other.serves
                    ? item.serves : LogRecord.wins(item.stamp, over: other.stamp, now: now)
                let loser = repeated[wins ? best[known] : index]
                parts[Int(loser.part)].markSuperseded(Int(loser.offset))
                if wins { best[known] = index }
            } else {
                best.append(index)
            }
        }
    }
}
