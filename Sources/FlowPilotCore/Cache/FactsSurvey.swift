import Foundation
import Synchronization

/// `cache info` of a format-2 log from each sealed segment's index and
/// facts (`SegmentFacts`), without reading a record: what a walk
/// (`LogSurvey`, then every record) would count, at about 36 bytes read a
/// record where the walk reads each record and, for every key written more
/// than once, its records again (docs/cache-format.md, "Segment facts").
///
/// The key space is cut into ranges of first bytes, as the walk's first
/// pass cuts it; each range is read from every index (its keys) and every
/// facts file (its slots, in the index's order), on up to `workers` cores, a range a
/// core at a time. A key met once is its only record: its facts are
/// counted as read. The records of a key met more than once are grouped
/// (a table numbers each such key's place in one array: no sort) and the
/// one a lookup serves is counted: of those whose flow reads back whole
/// the newest, else the newest of all, as `LogSurvey` weighs them. Where the
/// facts cannot decide (two records of one millisecond, whose order is
/// their `unique`; two keys whose 8-byte prefixes collide), the group's
/// records are read and weighed as the walk weighs them.
///
/// Segments without facts to trust (being written, written by an fpctl
/// before facts, or changed since they were sealed) have theirs made here
/// from their bytes, up to `inMemorySlots` records in all; past that, or
/// past `maxTableSize` placements or flows in all, there is no answer and
/// `info` walks the log.
struct FactsSurvey {
    struct Counts {
        var placements: [(name: String, entries: Int, fresh: Int, bytes: Int64)]
        /// The placements with an alias.
        var aliases: [String]
        var oldest: Int64?
        var newest: Int64?
    }

    /// Index slots counted at once at most, over every worker together (each
    /// holds a range of `rangeSlots / workers`, about 70 bytes a slot).
    static let rangeSlots = 1 << 18
    /// Records of segments without facts made in memory at most.
    static let inMemorySlots = 1 << 18
    /// Cores counting at once, at most: each holds its own range.
    static let workers = 2

    /// One segment: its index and facts files, or its facts made from its bytes.
    final class Part: @unchecked Sendable {
        let segment: FlowLog.Segment
        var path: String { segment.path }
        /// The segment's length its facts cover: what a walk deciding by them reads no further than.
        let length: Int
        /// 257 cumulative counts of keys by first byte, the first 0.
        let fanout: [UInt32]
        /// Local placement and object numbers -> global ones.
        let placements: [UInt32]
        let objects: [UInt32]
        // Files read range by range (kept open when the open-file limit allows).
        var indexPath: String { segment.index ?? "" }
        var factsPath: String { segment.facts }
        var indexFD: Int32 = -1
        var factsFD: Int32 = -1
        let slotsOffset: Int
        /// Made from the segment's bytes, sorted by (prefix, offset): no files read.
        let memory: (prefixes: [UInt64], offsets: [UInt32], slots: [SegmentFacts.Slot])?

        init(
            segment: FlowLog.Segment, length: Int, fanout: [UInt32], placements: [UInt32], objects: [UInt32],
            slotsOffset: Int, memory: (prefixes: [UInt64], offsets: [UInt32], slots: [SegmentFacts.Slot])?
        ) {
            (self.segment, self.length, self.fanout, self.placements, self.objects) = (
                segment, length, fanout, placements, objects
            )
            (self.slotsOffset, self.memory) = (slotsOffset, memory)
        }

        deinit {
            if indexFD >= 0 { close(indexFD) }
            if factsFD >= 0 { close(factsFD) }
        }
    }

    /// Placements and (flow, flow id) pairs numbered across segments, by their bytes.
    private struct Names {
        var list: [[UInt8]] = []
        var numbers: [[UInt8]: UInt32] = [:]

        mutating func number(_ bytes: [UInt8]) -> UInt32 {
            if let known = numbers[bytes] { return known }
            numbers[bytes] = UInt32(list.count)
            list.append(bytes)
            return UInt32(list.count - 1)
        }
    }

    let parts: [Part]
    private let placementNames: [[UInt8]]
    private let objectKeys: [[UInt8]]
    let log: FlowLog

    /// The survey of `log` as listed now; nil when it must be walked instead.
    /// `keepOpen`: whether each index and facts file stays open from the
    /// survey to its counting (nil: where the open-file limit allows two a
    /// segment); otherwise each is opened for each read.
    init?(_ log: FlowLog, inMemorySlots: Int = FactsSurvey.inMemorySlots, keepOpen: Bool? = nil) {
        self.log = log
        var placements = Names()
        var objects = Names()
        var parts: [Part] = []
        var inMemory = 0
        let segments = log.segments()
        let keepOpen =
            keepOpen
            ?? ((Platform.openFileLimit() ?? Int.max) - Platform.openDescriptorCount() > 2 * segments.count + 64)
        let buffer = WholeFileBuffer()
        for segment in segments {
            let fd = open(segment.path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                // Gone since the listing: a compaction; the walk lists again.
                if errno == ENOENT { return nil }
                continue
            }
            defer { close(fd) }
            if let index = segment.index,
                let part = Self.sealed(
                    segment, fd: fd, index: index, buffer: buffer, placements: &placements,
                    objects: &objects, keepOpen: keepOpen)
            {
                parts.append(part)
            } else {
                guard
                    let part = Self.inMemory(
                        segment, fd: fd, buffer: buffer, placements: &placements, objects: &objects)
                else { return nil }
                inMemory += part.memory?.slots.count ?? 0
                guard inMemory <= inMemorySlots else { return nil }
                parts.append(part)
            }
            guard placements.list.count <= SegmentFacts.maxTableSize, objects.list.count <= SegmentFacts.maxTableSize
            else { return nil }
        }
        (self.parts, placementNames, objectKeys) = (parts, placements.list, objects.list)
    }

    /// A sealed segment whose index and facts check out whole, the facts
    /// naming the segment as it is now; nil otherwise.
    private static func sealed(
        _ segment: FlowLog.Segment, fd: Int32, index: String, buffer: WholeFileBuffer,
        placements: inout Names, objects: inout Names, keepOpen: Bool
    ) -> Part? {
        guard let stamp = SegmentFacts.Stamp(fd) else { return nil }
        let indexFD = open(index, O_RDONLY | O_CLOEXEC)
        guard indexFD >= 0 else { return nil }
        var keep = false
        defer { if !keep { close(indexFD) } }
        guard let checkedIndex = SegmentIndex.checked(indexFD, segmentLength: Int(stamp.size)),
            checkedIndex.covered == Int(stamp.size)
        else { return nil }
        let factsFD = open(segment.facts, O_RDONLY | O_CLOEXEC)
        guard factsFD >= 0 else { return nil }
        defer { if !keep { close(factsFD) } }
        let checked = buffer.withBytes(of: factsFD) { SegmentFacts.check($0) } ?? nil
        guard let checked, checked.stamp == stamp, checked.covered == checkedIndex.covered,
            checked.count == Int(checkedIndex.fanout[256])
        else { return nil }
        let part = Part(
            segment: segment, length: checkedIndex.covered, fanout: checkedIndex.fanout,
            placements: checked.placements.map { placements.number($0) },
            objects: checked.objects.map { objects.number($0) },
            slotsOffset: checked.slotsOffset, memory: nil)
        if keepOpen {
            keep = true
            (part.indexFD, part.factsFD) = (indexFD, factsFD)
        }
        return part
    }

    /// A segment's facts made from its bytes (its records as a walk reads
    /// them, up to its length now), sorted as an index sorts them.
    private static func inMemory(
        _ segment: FlowLog.Segment, fd: Int32, buffer: WholeFileBuffer, placements: inout Names,
        objects: inout Names
    ) -> Part? {
        var builder = SegmentFacts.Builder()
        var keys: [(prefix: UInt64, offset: UInt32)] = []
        var digits = [UInt8](repeating: 0, count: 64)
        var length = 0
        let read: Bool? = buffer.withBytes(of: fd) { raw in
            length = raw.count
            guard LogSegment.hasMagic(raw) else { return true }
            _ = LogSegment.walk(raw) { offset, view in
                keys.append((LogRecord.keyPrefix(of: view, digits: &digits), UInt32(offset)))
                builder.add(view)
            }
            return true
        }
        guard read != nil, !builder.abandoned, builder.slots.count == keys.count else { return nil }
        let order = keys.indices.sorted { (keys[$0].prefix, keys[$0].offset) < (keys[$1].prefix, keys[$1].offset) }
        var fanout = [UInt32](repeating: 0, count: 257)
        for key in keys { fanout[Int(key.prefix >> 56) + 1] += 1 }
        for byte in 0..<256 { fanout[byte + 1] += fanout[byte] }
        return Part(
            segment: segment, length: length, fanout: fanout,
            placements: builder.placements.map { placements.number($0) },
            objects: builder.objects.map { objects.number($0) }, slotsOffset: 0,
            memory: (order.map { keys[$0].prefix }, order.map { keys[$0].offset }, order.map { builder.slots[$0] }))
    }

    // MARK: Counting

    /// What a worker counted, by global placement number.
    private struct Tally {
        var entries: [Int]
        var fresh: [Int]
        var bytes: [Int64]
        var aliased: [Bool]
        var oldest = Int64.max
        var newest = Int64.min

        init(placements: Int) {
            (entries, fresh, bytes) = (
                Array(repeating: 0, count: placements), Array(repeating: 0, count: placements),
                Array(repeating: 0, count: placements)
            )
            aliased = Array(repeating: false, count: placements)
        }

        mutating func merge(_ other: Tally) {
            for n in entries.indices {
                entries[n] += other.entries[n]
                fresh[n] += other.fresh[n]
                bytes[n] += other.bytes[n]
                aliased[n] = aliased[n] || other.aliased[n]
            }
            (oldest, newest) = (min(oldest, other.oldest), max(newest, other.newest))
        }
    }

    /// The counts at `now` (freshness), each key's survivor chosen by the
    /// reader's clock as the walk chooses it.
    /// nil when a file could not be read whole meanwhile (a compaction
    /// removed it, where the open-file limit did not let it stay open).
    /// `losers`, when given, is told (under a lock, a range's at a time) of
    /// each record a newer one of its key supersedes: its part's number and
    /// its offset (`LogSurvey.decidedByFacts`).
    func counts(
        at now: Date, rangeSlots: Int = FactsSurvey.rangeSlots,
        losers: (@Sendable ([(part: UInt32, offset: UInt32)]) -> Void)? = nil
    ) -> Counts? {
        // A range a core at a time, each of its share of `rangeSlots`: the memory of one range of them all.
        let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, Self.workers))
        let perWorker = max(1, rangeSlots / workers)
        let ranges = Self.ranges(parts, rangeSlots: perWorker)
        let next = Atomic<Int>(0)
        let tallies = Mutex<[Tally]>([])
        let failed = Atomic<Bool>(false)
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            var worker = Worker(survey: self, now: now, capacity: perWorker)
            worker.keepsLosers = losers != nil
            defer { worker.release() }
            while true {
                let at = next.add(1, ordering: .relaxed).oldValue
                guard at < ranges.count else { break }
                worker.count(ranges[at])
                if let losers, !worker.losers.isEmpty {
                    losers(worker.losers)
                    worker.losers.removeAll(keepingCapacity: true)
                }
            }
            let tally = worker.tally
            tallies.withLock { $0.append(tally) }
            if worker.failed { failed.store(true, ordering: .relaxed) }
        }
        guard !failed.load(ordering: .relaxed) else { return nil }
        var total = Tally(placements: placementNames.count)
        for tally in tallies.withLock({ $0 }) { total.merge(tally) }
        var counts = Counts(placements: [], aliases: [], oldest: nil, newest: nil)
        for n in placementNames.indices {
            let name = String(decoding: placementNames[n], as: UTF8.self)
            if total.entries[n] > 0 {
                counts.placements.append((name, total.entries[n], total.fresh[n], total.bytes[n]))
            }
            if total.aliased[n] { counts.aliases.append(name) }
        }
        if total.oldest <= total.newest { (counts.oldest, counts.newest) = (total.oldest, total.newest) }
        return counts
    }

    /// Ranges of first bytes, each holding at most `rangeSlots` keys of every part together (at least one byte).
    static func ranges(_ parts: [Part], rangeSlots: Int) -> [Range<Int>] {
        var perByte = [Int](repeating: 0, count: 256)
        for part in parts {
            for byte in 0..<256 { perByte[byte] += Int(part.fanout[byte + 1] - part.fanout[byte]) }
        }
        return LogSurvey.ranges(perByte: perByte, rangeSlots: rangeSlots)
    }

    /// One record of a key met more than once in a range.
    private struct Member {
        var resolvedAt: Int64
        /// Global placement << 33 | alias << 32 | the fingerprint's first 4 bytes: equal for one key's records.
        var identity: UInt64
        var part: UInt32
        var offset: UInt32
        var ttl: UInt32
        var size: UInt32
        var object: UInt32
    }

    /// What one core holds while it counts ranges, reused from range to range.
    /// A value, not a class: its hot loops' accesses are checked when it is
    /// compiled, not each at run time (a class's stored properties are).
    private struct Worker {
        let survey: FactsSurvey
        let now: Date
        let nowMillis = LogRecord.nowMillis
        var tally: Tally
        var prefixes: [UInt64] = []
        var offsets: [UInt32] = []
        /// A read came back short: what was counted is not the log's.
        var failed = false
        /// Whether to keep, of a range, the records a newer one of their key supersedes.
        var keepsLosers = false
        var losers: [(part: UInt32, offset: UInt32)] = []
        /// Each slot's place in `table`, as it was counted.
        var places: [UInt32] = []
        var table: PrefixTable
        var members: [Member] = []
        /// What one read of an index or facts file lands in.
        private var buffer: UnsafeMutableRawBufferPointer
        /// Per global object: 0 not known yet, 1 serves, 2 does not.
        var serves: [UInt8]
        var servable: FlowLog.Servable

        init(survey: FactsSurvey, now: Date, capacity: Int) {
            (self.survey, self.now) = (survey, now)
            tally = Tally(placements: survey.placementNames.count)
            table = PrefixTable(capacity: capacity)
            serves = Array(repeating: 0, count: survey.objectKeys.count)
            servable = FlowLog.Servable(survey.log)
            buffer = .allocate(byteCount: 64 << 10, alignment: 8)
        }

        /// Its read buffer given back (a struct has no deinit).
        func release() { buffer.deallocate() }

        /// `count` bytes of `fd` (or of `path`, opened for the read) from `offset` into `buffer`; zeroes past
        /// what could be read (a file changed under us: counted, never served).
        private mutating func read(_ fd: Int32, path: String, count: Int, at offset: Int) -> UnsafeRawBufferPointer {
            if buffer.count < count {
                buffer.deallocate()
                buffer = .allocate(byteCount: count, alignment: 8)
            }
            let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
            var got = 0
            if fd >= 0 {
                got = SegmentIndex.readUpTo(fd, target, at: offset)
            } else {
                let opened = open(path, O_RDONLY | O_CLOEXEC)
                if opened >= 0 {
                    got = SegmentIndex.readUpTo(opened, target, at: offset)
                    close(opened)
                }
            }
            if got < count {
                failed = true
                UnsafeMutableRawBufferPointer(rebasing: target[got...]).initializeMemory(as: UInt8.self, repeating: 0)
            }
            return UnsafeRawBufferPointer(target)
        }

        mutating func count(_ range: Range<Int>) {
            let parts = survey.parts
            prefixes.removeAll(keepingCapacity: true)
            offsets.removeAll(keepingCapacity: true)
            for part in parts { readKeys(part, range) }
            table.reset(capacity: prefixes.count)
            places.removeAll(keepingCapacity: true)
            for prefix in prefixes { places.append(table.add(prefix)) }
            let repeated = table.numberRepeated()
            members.removeAll(keepingCapacity: true)
            members.append(
                contentsOf: repeatElement(
                    Member(resolvedAt: 0, identity: 0, part: 0, offset: 0, ttl: 0, size: 0, object: 0), count: repeated)
            )
            var at = 0
            for (number, part) in parts.enumerated() {
                let (from, to) = (Int(part.fanout[range.lowerBound]), Int(part.fanout[range.upperBound]))
                guard to > from else { continue }
                if let memory = part.memory {
                    for n in 0..<(to - from) { take(memory.slots[from + n], of: part, number: number, at: at + n) }
                } else {
                    let raw = read(
                        part.factsFD, path: part.factsPath, count: (to - from) * SegmentFacts.slotSize,
                        at: part.slotsOffset + from * SegmentFacts.slotSize)
                    for n in 0..<(to - from) { take(SegmentFacts.slot(raw, n), of: part, number: number, at: at + n) }
                }
                at += to - from
            }
            for group in table.groups { settle(group.start..<(group.start + group.count)) }
        }

        /// Slot `at` of the range: counted at once when its prefix is met once, else kept in its key's run.
        @inline(__always)
        private mutating func take(_ slot: SegmentFacts.Slot, of part: Part, number: Int, at: Int) {
            let place = places[at]
            if table.isOnce(place) {
                add(part, slot)
                return
            }
            members[table.nextMember(place)] = Member(
                resolvedAt: slot.resolvedAt,
                identity: UInt64(part.placements[Int(slot.placement)]) << 33 | (slot.isAlias ? 1 << 32 : 0)
                    | UInt64(slot.check),
                part: UInt32(number), offset: offsets[at], ttl: slot.ttl, size: slot.size,
                object: slot.isAlias ? UInt32.max : part.objects[Int(slot.object)])
        }

        /// The range's keys (and offsets) of `part`, appended in the index's order.
        private mutating func readKeys(_ part: Part, _ range: Range<Int>) {
            let (from, to) = (Int(part.fanout[range.lowerBound]), Int(part.fanout[range.upperBound]))
            guard to > from else { return }
            if let memory = part.memory {
                prefixes += memory.prefixes[from..<to]
                offsets += memory.offsets[from..<to]
                return
            }
            let raw = read(
                part.indexFD, path: part.indexPath, count: (to - from) * SegmentIndex.entrySize,
                at: SegmentIndex.headerSize + SegmentIndex.fanoutSize + from * SegmentIndex.entrySize)
            for n in 0..<(to - from) {
                let entry = n * SegmentIndex.entrySize
                prefixes.append(UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: entry, as: UInt64.self)))
                offsets.append(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: entry + 8, as: UInt32.self)))
            }
        }

        /// Counts a key's surviving record.
        private mutating func add(_ part: Part, _ slot: SegmentFacts.Slot) {
            add(
                placement: Int(part.placements[Int(slot.placement)]), alias: slot.isAlias, resolvedAt: slot.resolvedAt,
                ttl: slot.ttl, size: slot.size)
        }

        private mutating func add(placement: Int, alias: Bool, resolvedAt: Int64, ttl: UInt32, size: UInt32) {
            if alias {
                tally.aliased[placement] = true
                return
            }
            tally.entries[placement] += 1
            tally.bytes[placement] += Int64(size)
            if CachedFlow.isFresh(resolvedAt: LogRecord.date(millis: resolvedAt), ttlSeconds: Int(ttl), at: now) {
                tally.fresh[placement] += 1
            }
            tally.oldest = min(tally.oldest, resolvedAt)
            tally.newest = max(tally.newest, resolvedAt)
        }

        private mutating func add(_ member: Member) {
            add(
                placement: Int(member.identity >> 33), alias: member.identity & (1 << 32) != 0,
                resolvedAt: member.resolvedAt, ttl: member.ttl, size: member.size)
        }

        private mutating func memberServes(_ member: Member) -> Bool {
            guard member.object != UInt32.max else { return true }
            let object = Int(member.object)
            if serves[object] == 0 {
                let key = survey.objectKeys[object]
                let answer = key.withUnsafeBytes { raw in
                    servable.serves(
                        sha: UnsafeRawBufferPointer(rebasing: raw[..<32]),
                        flowID: UnsafeRawBufferPointer(rebasing: raw[32...]))
                }
                serves[object] = answer ? 1 : 2
            }
            return serves[object] == 1
        }

        /// The records of one prefix: its key's survivor counted, decided by
        /// the facts where they can, else by reading the records.
        private mutating func settle(_ group: Range<Int>) {
            let first = members[group.lowerBound]
            guard members[group].allSatisfy({ $0.identity == first.identity }) else { return settleByRecords(group) }
            let limit = nowMillis + Int64(CachedFlow.clockSkew * 1000)
            var bestAt = group.lowerBound
            var bestServes = memberServes(first)
            for at in group.dropFirst() {
                let (member, best) = (members[at], members[bestAt])
                let serves = memberServes(member)
                if serves != bestServes {
                    if serves { (bestAt, bestServes) = (at, serves) }
                    continue
                }
                let (future, bestFuture) = (member.resolvedAt > limit, best.resolvedAt > limit)
                if future != bestFuture {
                    if bestFuture { bestAt = at }
                    continue
                }
                // One millisecond: their order is their `unique`, in the records.
                if member.resolvedAt == best.resolvedAt { return settleByRecords(group) }
                if member.resolvedAt > best.resolvedAt { bestAt = at }
            }
            add(members[bestAt])
            if keepsLosers {
                for at in group where at != bestAt { losers.append((members[at].part, members[at].offset)) }
            }
        }

        /// A group the facts cannot settle: its records read, grouped by
        /// their whole key, and each key's survivor counted, as the walk weighs them.
        private mutating func settleByRecords(_ group: Range<Int>) {
            var read: [(member: Member, key: [UInt8], stamp: (Int64, UInt64), serves: Bool)] = []
            for at in group {
                let member = members[at]
                let fd = open(survey.parts[Int(member.part)].path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else {
                    // Removed meanwhile (a compaction): this key cannot be counted, so nothing is.
                    failed = true
                    continue
                }
                defer { close(fd) }
                var found: (key: [UInt8], stamp: (Int64, UInt64))?
                FlowLog.withRecord(fd, at: Int(member.offset)) { view in
                    // An alias's key is its placement alone (the identity it points at is its value).
                    var key = [view.kind.rawValue]
                    if view.kind == .entry { key += view.fingerprint }
                    key += view.placement
                    found = (key, view.stamp)
                }
                guard let found else {
                    failed = true
                    continue
                }
                read.append((member, found.key, found.stamp, memberServes(member)))
            }
            var settled = [Bool](repeating: false, count: read.count)
            for start in read.indices where !settled[start] {
                var best = start
                for other in read.indices where !settled[other] && read[other].key == read[start].key {
                    settled[other] = true
                    let (item, known) = (read[other], read[best])
                    let wins =
                        item.serves != known.serves
                        ? item.serves : LogRecord.wins(item.stamp, over: known.stamp, now: nowMillis)
                    if wins { best = other }
                }
                add(read[best].member)
                if keepsLosers {
                    for other in read.indices where other != best && read[other].key == read[start].key {
                        losers.append((read[other].member.part, read[other].member.offset))
                    }
                }
            }
        }
    }

    /// How often each key prefix of one range occurs, and for those met
    /// more than once a place for each of their records in one array, in
    /// runs: an open-addressed table twice the range's size.
    private struct PrefixTable {
        /// A prefix, how many times it was met (0: an empty place) and, for one met more than once, where its
        /// next record goes: one cache line a probe.
        private struct Place {
            var prefix: UInt64
            var count: UInt32
            var next: UInt32
        }

        private var places: [Place] = []
        private var mask = 0
        private(set) var groups: [(start: Int, count: Int)] = []

        init(capacity: Int) { reset(capacity: capacity) }

        mutating func reset(capacity: Int) {
            var count = 16
            while count < capacity * 2 { count *= 2 }
            // Never smaller than it was: a short last range does not cost the next range a new table.
            if count <= places.count {
                places.withUnsafeMutableBufferPointer { $0.update(repeating: Place(prefix: 0, count: 0, next: 0)) }
            } else {
                places = []
                places = [Place](repeating: Place(prefix: 0, count: 0, next: 0), count: count)
            }
            mask = places.count - 1
            groups.removeAll(keepingCapacity: true)
        }

        /// Counts `prefix` once more; its place, for `isOnce` and `nextMember` once every prefix is in.
        @inline(__always)
        mutating func add(_ prefix: UInt64) -> UInt32 {
            let mask = mask
            return places.withUnsafeMutableBufferPointer { places in
                var at = Int(truncatingIfNeeded: prefix) & mask
                while places[at].count != 0 && places[at].prefix != prefix { at = (at + 1) & mask }
                places[at].prefix = prefix
                places[at].count += 1
                return UInt32(at)
            }
        }

        @inline(__always)
        func isOnce(_ place: UInt32) -> Bool { places[Int(place)].count == 1 }

        /// Gives each prefix met more than once its run of places; how many places in all.
        mutating func numberRepeated() -> Int {
            var total = 0
            for at in places.indices where places[at].count > 1 {
                places[at].next = UInt32(total)
                groups.append((total, Int(places[at].count)))
                total += Int(places[at].count)
            }
            return total
        }

        mutating func nextMember(_ place: UInt32) -> Int {
            defer { places[Int(place)].next += 1 }
            return Int(places[Int(place)].next)
        }
    }
}
