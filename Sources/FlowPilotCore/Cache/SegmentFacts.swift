import Foundation

/// What `cache info` counts of each record of a sealed segment, in its
/// index's order: `<segment>.facts` (docs/cache-format.md, "Segment facts").
/// With it, `info` reads 36 bytes a record (the index's slot and this one)
/// instead of the record itself and, for a key written more than once, the
/// records that decide between its versions: a summary each sealed segment
/// carries, combined (git's pack `.idx` and `count-objects`).
///
/// A writer makes it as it seals the segment, from the records it appended,
/// before the index: a segment whose index is published has its facts, if
/// the writer could write them. It names the segment's inode, size and
/// change times as its writer left it; `info` trusts it only while the
/// segment is still exactly that, and its CRC holds. It never says which
/// record a lookup serves, so nothing is served from it.
enum SegmentFacts {
    static let suffix = ".facts"
    static let magic: [UInt8] = Array("FPFCT\u{0}2\n".utf8)
    /// Magic, covered length, count, the segment's inode, size and
    /// modification time (seconds and nanoseconds), placements, objects.
    static let headerSize = 8 + 8 + 4 + 8 + 8 + (8 + 4) + 4 + 4
    /// A slot: `resolved_at` (8), the fingerprint's first 4 bytes (an
    /// alias: 0), TTL (4), flow size (4), placement number (2), object
    /// number (2; an alias: `aliasObject`).
    static let slotSize = 24
    static let aliasObject = UInt16.max
    /// A segment naming more placements, or more (object, flow id) pairs,
    /// than this gets no facts (its slots number them in 2 bytes).
    static let maxTableSize = Int(UInt16.max) - 1

    /// One record's facts.
    struct Slot: Equatable {
        var resolvedAt: Int64
        var check: UInt32
        var ttl: UInt32
        var size: UInt32
        var placement: UInt16
        var object: UInt16

        var isAlias: Bool { object == SegmentFacts.aliasObject }
    }

    /// The segment as its writer left it: its inode, size and modification
    /// time. Its writer sets the time as it seals (`sealing`), so the value
    /// is the file system's own answer to a change of attributes, not what
    /// an attribute cache held (a `fstat` after a write, through NFS or
    /// FUSE, may show the time before it); any later write, truncation or
    /// `touch` changes it. The change time is not part of it: no cache
    /// keeps it in step across nodes.
    struct Stamp: Equatable {
        let inode: UInt64
        let size: Int64
        let modified: (Int, Int)

        static func == (a: Stamp, b: Stamp) -> Bool {
            a.inode == b.inode && a.size == b.size && a.modified == b.modified
        }

        init?(_ fd: Int32) {
            var info = stat()
            guard fstat(fd, &info) == 0 else { return nil }
            (inode, size, modified) = (UInt64(info.st_ino), Int64(info.st_size), Platform.times(info).modified)
        }

        init(inode: UInt64, size: Int64, modified: (Int, Int)) {
            (self.inode, self.size, self.modified) = (inode, size, modified)
        }

        /// The stamp of the segment open for writing in `fd`, its
        /// modification time set to now first; nil where it cannot be set.
        static func sealing(_ fd: Int32) -> Stamp? {
            // `UTIME_OMIT` and `UTIME_NOW`, macros Swift does not import.
            #if os(Linux)
                let (omit, now) = ((1 << 30) - 2, (1 << 30) - 1)
            #else
                let (omit, now) = (-2, -1)
            #endif
            var times = [timespec(tv_sec: 0, tv_nsec: omit), timespec(tv_sec: 0, tv_nsec: now)]
            guard futimens(fd, &times) == 0 else { return nil }
            return Stamp(fd)
        }
    }

    /// The facts of the records a writer appends, in their order, with
    /// each placement and each (object, flow id) numbered once.
    struct Builder {
        private(set) var slots: [Slot] = []
        private(set) var placements: [[UInt8]] = []
        private(set) var objects: [[UInt8]] = []
        private var placementNumbers: [[UInt8]: UInt16] = [:]
        private var objectNumbers: [[UInt8]: UInt16] = [:]
        /// Past `maxTableSize` of either: no facts for this segment.
        private(set) var abandoned = false

        /// The record whose bytes (header and body) start at `offset` of `encoded`.
        mutating func add(_ encoded: UnsafeRawBufferPointer, at offset: Int) {
            guard !abandoned else { return }
            let length = Int(LogRecord.load(encoded, offset, 4))
            let start = offset + LogRecord.headerSize
            guard length <= encoded.count - start,
                let view = LogRecord.View(UnsafeRawBufferPointer(rebasing: encoded[start..<(start + length)]))
            else {
                abandoned = true
                return
            }
            add(view)
        }

        mutating func add(_ view: LogRecord.View) {
            let empty = UnsafeRawBufferPointer(start: nil, count: 0)
            guard let placement = number(view.placement, empty, in: &placements, &placementNumbers) else {
                return abandon()
            }
            var object = SegmentFacts.aliasObject
            var check: UInt32 = 0
            if view.kind == .entry {
                guard let number = number(view.flowSHA256, view.flowID, in: &objects, &objectNumbers) else {
                    return abandon()
                }
                object = number
                check = UInt32(bigEndian: view.fingerprint.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
            }
            slots.append(
                Slot(
                    resolvedAt: view.resolvedAtMillis, check: check, ttl: view.ttlSeconds, size: view.flowSize,
                    placement: placement, object: object))
        }

        private mutating func abandon() {
            (abandoned, slots, placements, objects, placementNumbers, objectNumbers) = (true, [], [], [], [:], [:])
        }

        /// The number in `table` of the bytes `head` then `tail`: a segment names a few placements and flows,
        /// so the first `scanned` entries are compared in place (no array made, nothing hashed; records of two
        /// placements alternate), the rest found by a dictionary.
        private func number(
            _ head: UnsafeRawBufferPointer, _ tail: UnsafeRawBufferPointer, in table: inout [[UInt8]],
            _ numbers: inout [[UInt8]: UInt16]
        ) -> UInt16? {
            for n in 0..<min(table.count, Self.scanned) {
                let matches = table[n].withUnsafeBytes { entry in
                    guard entry.count == head.count + tail.count else { return false }
                    func same(_ at: Int, _ part: UnsafeRawBufferPointer) -> Bool {
                        guard let p = entry.baseAddress, let q = part.baseAddress else { return true }
                        return memcmp(p + at, q, part.count) == 0
                    }
                    return same(0, head) && same(head.count, tail)
                }
                if matches { return UInt16(n) }
            }
            let key = [UInt8](head) + [UInt8](tail)
            if let known = numbers[key] { return known }
            guard table.count < SegmentFacts.maxTableSize else { return nil }
            numbers[key] = UInt16(table.count)
            table.append(key)
            return UInt16(table.count - 1)
        }

        /// Entries compared in place before the dictionary is asked.
        static let scanned = 8
    }

    /// The file: the slots in `order` (the index's order: `order[i]` is the
    /// appended record at index slot `i`).
    static func encode(_ builder: Builder, order: [Int], covering length: UInt64, stamp: Stamp) -> [UInt8] {
        var out = magic
        out.reserveCapacity(headerSize + order.count * slotSize + 4096)
        LogRecord.append(length, 8, to: &out)
        LogRecord.append(UInt64(order.count), 4, to: &out)
        LogRecord.append(stamp.inode, 8, to: &out)
        LogRecord.append(UInt64(bitPattern: stamp.size), 8, to: &out)
        LogRecord.append(UInt64(bitPattern: Int64(stamp.modified.0)), 8, to: &out)
        LogRecord.append(UInt64(stamp.modified.1), 4, to: &out)
        LogRecord.append(UInt64(builder.placements.count), 4, to: &out)
        LogRecord.append(UInt64(builder.objects.count), 4, to: &out)
        for placement in builder.placements { appendString(placement[...], to: &out) }
        for object in builder.objects {
            out += object.prefix(32)
            appendString(object.dropFirst(32), to: &out)
        }
        for at in order {
            let slot = builder.slots[at]
            LogRecord.append(UInt64(bitPattern: slot.resolvedAt), 8, to: &out)
            LogRecord.append(UInt64(slot.check), 4, to: &out)
            LogRecord.append(UInt64(slot.ttl), 4, to: &out)
            LogRecord.append(UInt64(slot.size), 4, to: &out)
            LogRecord.append(UInt64(slot.placement), 2, to: &out)
            LogRecord.append(UInt64(slot.object), 2, to: &out)
        }
        let crc = out.withUnsafeBytes { LogRecord.crc($0) }
        LogRecord.append(UInt64(crc), 4, to: &out)
        return out
    }

    private static func appendString(_ bytes: ArraySlice<UInt8>, to out: inout [UInt8]) {
        var length = bytes.count
        repeat {
            out.append(UInt8(length & 0x7F) | (length >= 0x80 ? 0x80 : 0))
            length >>= 7
        } while length > 0
        out += bytes
    }

    /// A facts file checked whole: its tables, and where its slots start.
    struct Checked {
        let covered: Int
        let count: Int
        let stamp: Stamp
        let placements: [[UInt8]]
        /// Each: the flow's SHA-256 (32 bytes), then its flow id.
        let objects: [[UInt8]]
        let slotsOffset: Int
    }

    /// The facts in `raw` (a whole file), nil unless its magic, lengths,
    /// tables and CRC all hold (`cache verify` asks this too).
    static func check(_ raw: UnsafeRawBufferPointer) -> Checked? {
        guard raw.count >= headerSize + 4, raw.prefix(8).elementsEqual(magic),
            LogRecord.crc(UnsafeRawBufferPointer(rebasing: raw[..<(raw.count - 4)]))
                == UInt32(LogRecord.load(raw, raw.count - 4, 4))
        else { return nil }
        let count = Int(LogRecord.load(raw, 16, 4))
        let stamp = Stamp(
            inode: LogRecord.load(raw, 20, 8), size: Int64(bitPattern: LogRecord.load(raw, 28, 8)),
            modified: (Int(Int64(bitPattern: LogRecord.load(raw, 36, 8))), Int(LogRecord.load(raw, 44, 4))))
        let (placementCount, objectCount) = (Int(LogRecord.load(raw, 48, 4)), Int(LogRecord.load(raw, 52, 4)))
        guard placementCount <= maxTableSize, objectCount <= maxTableSize else { return nil }
        var at = headerSize
        func string() -> [UInt8]? {
            var (length, shift) = (0, 0)
            while true {
                guard at < raw.count - 4, shift < 28 else { return nil }
                let byte = raw[at]
                at += 1
                length |= Int(byte & 0x7F) << shift
                shift += 7
                if byte & 0x80 == 0 { break }
            }
            guard length <= raw.count - 4 - at else { return nil }
            defer { at += length }
            return [UInt8](raw[at..<(at + length)])
        }
        var placements: [[UInt8]] = []
        for _ in 0..<placementCount {
            guard let name = string() else { return nil }
            placements.append(name)
        }
        var objects: [[UInt8]] = []
        for _ in 0..<objectCount {
            guard raw.count - 4 - at >= 32 else { return nil }
            let sha = [UInt8](raw[at..<(at + 32)])
            at += 32
            guard let id = string() else { return nil }
            objects.append(sha + id)
        }
        guard raw.count - 4 - at == count * slotSize else { return nil }
        return Checked(
            covered: Int(LogRecord.load(raw, 8, 8)), count: count, stamp: stamp, placements: placements,
            objects: objects, slotsOffset: at)
    }

    /// Slot `n` of `slots` (the slots' bytes, from the first one read).
    @inline(__always)
    static func slot(_ slots: UnsafeRawBufferPointer, _ n: Int) -> Slot {
        let base = n * slotSize
        return Slot(
            resolvedAt: Int64(
                bitPattern: UInt64(littleEndian: slots.loadUnaligned(fromByteOffset: base, as: UInt64.self))),
            check: UInt32(littleEndian: slots.loadUnaligned(fromByteOffset: base + 8, as: UInt32.self)),
            ttl: UInt32(littleEndian: slots.loadUnaligned(fromByteOffset: base + 12, as: UInt32.self)),
            size: UInt32(littleEndian: slots.loadUnaligned(fromByteOffset: base + 16, as: UInt32.self)),
            placement: UInt16(littleEndian: slots.loadUnaligned(fromByteOffset: base + 20, as: UInt16.self)),
            object: UInt16(littleEndian: slots.loadUnaligned(fromByteOffset: base + 22, as: UInt16.self)))
    }

    /// What is wrong with the facts of the segment at `segmentPath` (`cache verify`): their
    /// bytes, or their agreement with their segment's index; nil when they
    /// hold, or when their segment has no index (a writer killed between
    /// the two: `info` reads that segment's records) or is gone. A segment
    /// changed since it was sealed is not this finding: `info` does not
    /// trust such facts, and through another node's attribute cache a
    /// sealed segment's time may read as its older one for a while.
    static func problem(ofSegment segmentPath: String, reading buffer: WholeFileBuffer) -> String? {
        let path = segmentPath + suffix
        let segmentFD = open(segmentPath, O_RDONLY | O_CLOEXEC)
        guard segmentFD >= 0 else { return nil }
        defer { close(segmentFD) }
        let indexFD = open(segmentPath + LogSegment.indexSuffix, O_RDONLY | O_CLOEXEC)
        guard indexFD >= 0 else { return nil }
        defer { close(indexFD) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let checked = buffer.withBytes(of: fd, { check($0) }) ?? nil else {
            return "facts damaged (cache info reads this segment's records instead)"
        }
        if let index = SegmentIndex.checked(indexFD, segmentLength: FlowLog.length(segmentFD)),
            index.covered != checked.covered || Int(index.fanout[256]) != checked.count
        {
            return "facts do not match the segment's index (cache info reads its records instead)"
        }
        return nil
    }
}
