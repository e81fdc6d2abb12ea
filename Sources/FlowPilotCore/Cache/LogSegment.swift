import Foundation
import Synchronization

/// A format-2 cache's segments (docs/cache-format.md, "Format 2"): files of
/// records, `log/<writer>-<n>.seg`, each appended to by one process only
/// (so writers on many nodes never share a file, and no append is ever
/// interleaved with another's), sealed with an index `<name>.idx` once it
/// holds `rollBytes`.
enum LogSegment {
    static let magic: [UInt8] = Array("FPSEG\u{0}2\n".utf8)
    static let suffix = ".seg"
    static let indexSuffix = ".idx"
    /// A writer starts a new segment once its current one holds this much
    /// (a `FlowLog`'s `rollBytes`, which tests make small).
    static let rollBytes = 4 << 20

    /// `<14-digit milliseconds>-<16 hex digits>`: the time a writer started
    /// and a random number, unique among writers on every node.
    static func newWriterID(now: Date = Date()) -> String {
        let millis = String(Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))
        let padded = String(repeating: "0", count: max(0, 14 - millis.count)) + millis
        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return padded + "-" + String(repeating: "0", count: 16 - random.count) + random
    }

    /// What reading a segment's bytes found.
    struct Read {
        var records: [(offset: Int, record: LogRecord)] = []
        /// Where reading stopped: the end of the bytes, or the start of a
        /// tail no whole record follows (a torn last record, zeroes, damage).
        var end: Int
        /// What stopped it before the end of the bytes.
        var problem: String?
        /// Damage read past (`LogRecord.resynchronize`): the bytes dropped,
        /// from where to where, and what was wrong at the start.
        var skipped: [(from: Int, to: Int, why: String)] = []
    }

    /// Every record of a segment's bytes from `offset` on. Damage costs the
    /// record it is in: reading goes on at the next whole record
    /// (`LogRecord.resynchronize`), and stops only at a tail no whole record
    /// follows. With `fingerprint` (32 bytes), only the records of that
    /// identity are parsed (a lookup's scan of a segment no index covers),
    /// the others skipped after their length and CRC are checked.
    static func records(
        in bytes: UnsafeRawBufferPointer, from offset: Int = magic.count, fingerprint: [UInt8]? = nil
    ) -> Read {
        var read = Read(end: offset)
        let walked = walk(bytes, from: offset, fingerprint: fingerprint) { read.records.append(($0, $1.record)) }
        (read.end, read.problem, read.skipped) = (walked.end, walked.problem, walked.skipped)
        return read
    }

    /// As `records(in:)`, each record handed to `visit` as it is read, in
    /// place (`LogRecord.View`, valid during the call), none kept.
    static func walk(
        _ bytes: UnsafeRawBufferPointer, from offset: Int = magic.count, fingerprint: [UInt8]? = nil,
        visit: (_ offset: Int, LogRecord.View) -> Void
    ) -> Read {
        var read = Read(end: offset)
        var offset = offset
        while offset < bytes.count {
            let why: String
            switch LogRecord.decode(bytes, at: offset, fingerprint: fingerprint) {
            case .skipped(let next):
                offset = next
                continue
            case .record(let record, let next):
                visit(offset, record)
                offset = next
                continue
            case .torn: why = "a torn last record"
            case .corrupt(let reason): why = reason
            }
            guard let next = LogRecord.resynchronize(bytes, after: offset) else {
                (read.end, read.problem) = (offset, "\(why) at byte \(offset)")
                return read
            }
            read.skipped.append((offset, next, why == "a torn last record" ? "a record cut short" : why))
            offset = next
        }
        read.end = offset
        return read
    }

    /// Whether what ends a segment's read at `end` is what a writer killed
    /// mid-append (or a power cut) leaves: a last record cut short, or
    /// nothing but zeroes to the end. Anything else is damage.
    static func isTornTail(_ bytes: UnsafeRawBufferPointer, at end: Int) -> Bool {
        if case .torn = LogRecord.decode(bytes, at: end) { return true }
        return bytes[end...].allSatisfy { $0 == 0 }
    }

    /// Whether a writer still holds the segment at `path` (its `flock`,
    /// taken when it made the segment and held until it closes it): such a
    /// segment may have bytes a reader on another node does not see yet
    /// (an attribute cache), so no compaction or merge rewrites or removes
    /// it, and what its tail looks like is not a killed writer's.
    /// A segment this process writes is not live to its own compaction: that
    /// runs under the cache's exclusive lock, so no append of this process is
    /// in flight, and its writer starts a new segment once this one is gone.
    static func isLive(_ path: String) -> Bool {
        if SegmentWriter.held.withLock({ $0.contains(path) }) { return false }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        // Shared: on NFS, flock is a POSIX lock, and an exclusive one needs a descriptor open for
        // writing (EBADF on this read-only one), so the probe would see every segment as dead.
        return flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }

    /// Whether `bytes` start as a segment does.
    static func hasMagic(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= magic.count && zip(bytes.prefix(magic.count), magic).allSatisfy { $0 == $1 }
    }
}

/// A sealed segment's index, `<segment>.idx`:
///
///     8 bytes "FPIDX\0" "2\n"   u64 the segment's length it covers   u32 count
///     256 x u32 fanout: how many keys' first byte is at most i
///     count x (u64 key prefix, u32 offset), sorted
///     u32 CRC-32 of everything before it
///
/// A process checks an index whole once (`checked`: its length, its CRC, the
/// segment as long as it covers) before it trusts it; then a lookup reads
/// the keys of one first byte: a few entries, whatever the segment holds.
/// A record past the covered length (none, in a segment sealed by its
/// writer) is read by scanning, and so is the whole segment when its index
/// fails the check. The record an offset leads to must still pass its own
/// CRC and match the whole key.
enum SegmentIndex {
    static let magic: [UInt8] = Array("FPIDX\u{0}2\n".utf8)
    static let headerSize = 8 + 8 + 4
    static let fanoutSize = 256 * 4
    static let entrySize = 12

    static func encode(_ entries: [(prefix: UInt64, offset: UInt32)], covering length: UInt64) -> [UInt8] {
        let sorted = entries.sorted { ($0.prefix, $0.offset) < ($1.prefix, $1.offset) }
        var out = magic
        out.reserveCapacity(headerSize + fanoutSize + sorted.count * entrySize + 4)
        LogRecord.append(length, 8, to: &out)
        LogRecord.append(UInt64(sorted.count), 4, to: &out)
        var counts = [UInt32](repeating: 0, count: 256)
        for entry in sorted { counts[Int(entry.prefix >> 56)] += 1 }
        var total: UInt32 = 0
        for count in counts {
            total += count
            LogRecord.append(UInt64(total), 4, to: &out)
        }
        for entry in sorted {
            // Big endian, so the bytes sort as the numbers do.
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: entry.prefix >> shift))
            }
            LogRecord.append(UInt64(entry.offset), 4, to: &out)
        }
        let crc = out.withUnsafeBytes { LogRecord.crc($0) }
        LogRecord.append(UInt64(crc), 4, to: &out)
        return out
    }

    /// An index file checked whole, once, before any lookup trusts it: its
    /// length is what its count says, its CRC holds, and the segment it
    /// belongs to still holds every byte it covers. Anything else (a
    /// truncated, zeroed or flipped index, a segment cut short) and the
    /// lookup scans the segment instead, so no key the segment holds is ever
    /// missed for an older one (docs/cache-format.md, "Reading").
    struct Checked {
        /// The segment's length the index covers.
        let covered: Int
        /// 257 cumulative counts, the first 0.
        let fanout: [UInt32]
    }

    /// The index in `fd` checked whole (streamed in 64 KiB reads, the CRC
    /// by libdeflate: about 12 bytes a record, read once a process), for a
    /// segment of `segmentLength` bytes; nil when it must not be trusted.
    static func checked(_ fd: Int32, segmentLength: Int) -> Checked? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        let size = Int(info.st_size)
        var head = [UInt8](repeating: 0, count: headerSize + fanoutSize)
        guard size >= head.count + 4, readFully(fd, &head, at: 0), Array(head.prefix(8)) == magic else { return nil }
        let (covered, count, fanout) = head.withUnsafeBytes { bytes in
            (
                Int(LogRecord.load(bytes, 8, 8)), Int(LogRecord.load(bytes, 16, 4)),
                [0] + (0..<256).map { UInt32(LogRecord.load(bytes, headerSize + $0 * 4, 4)) }
            )
        }
        guard size == headerSize + fanoutSize + count * entrySize + 4, Int(fanout[256]) == count,
            zip(fanout, fanout.dropFirst()).allSatisfy({ $0 <= $1 }),
            covered >= LogSegment.magic.count, covered <= segmentLength
        else { return nil }
        var crc = CRC32()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var offset = 0
        while offset < size - 4 {
            let want = min(chunk.count, size - 4 - offset)
            guard readUpTo(fd, &chunk, at: offset) >= want else { return nil }
            chunk.withUnsafeBytes { crc.update(UnsafeRawBufferPointer(rebasing: $0[..<want])) }
            offset += want
        }
        var stored = [UInt8](repeating: 0, count: 4)
        guard readFully(fd, &stored, at: size - 4),
            stored.withUnsafeBytes({ UInt32(LogRecord.load($0, 0, 4)) }) == crc.value
        else { return nil }
        return Checked(covered: covered, fanout: fanout)
    }

    /// The offsets of records whose key has `prefix`, from an index `checked` whole.
    static func offsets(_ fd: Int32, _ index: Checked, prefix: UInt64) -> [Int] {
        let first = Int(prefix >> 56)
        let (start, end) = (Int(index.fanout[first]), Int(index.fanout[first + 1]))
        guard end > start else { return [] }
        var slice = [UInt8](repeating: 0, count: (end - start) * entrySize)
        guard readFully(fd, &slice, at: headerSize + fanoutSize + start * entrySize) else { return [] }
        var found: [Int] = []
        slice.withUnsafeBytes { entries in
            for index in 0..<(end - start) {
                let base = index * entrySize
                let key = (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(entries[base + $1]) }
                if key == prefix { found.append(Int(LogRecord.load(entries, base + 8, 4))) }
            }
        }
        return found
    }

    /// Whether an index file's bytes are whole and agree with their CRC
    /// (`cache verify`); the length of the segment they cover.
    static func check(_ bytes: [UInt8]) -> UInt64? {
        bytes.withUnsafeBytes { check($0) }
    }

    /// `check` of an index's bytes read in place.
    static func check(_ raw: UnsafeRawBufferPointer) -> UInt64? {
        guard raw.count >= headerSize + fanoutSize + 4, raw.prefix(8).elementsEqual(magic) else { return nil }
        let count = Int(LogRecord.load(raw, 16, 4))
        guard raw.count == headerSize + fanoutSize + count * entrySize + 4,
            LogRecord.crc(UnsafeRawBufferPointer(rebasing: raw[..<(raw.count - 4)]))
                == UInt32(LogRecord.load(raw, raw.count - 4, 4))
        else { return nil }
        return LogRecord.load(raw, 8, 8)
    }

    /// A whole index's covered length, when its CRC holds, with its record
    /// offsets put in `offsets` (emptied first, its capacity kept from
    /// segment to segment): what `cache verify` says damage cost.
    static func entries(of raw: UnsafeRawBufferPointer, offsets: inout [Int]) -> Int? {
        offsets.removeAll(keepingCapacity: true)
        guard let covered = check(raw) else { return nil }
        let count = Int(LogRecord.load(raw, 16, 4))
        let base = headerSize + fanoutSize
        offsets.reserveCapacity(count)
        for n in 0..<count { offsets.append(Int(LogRecord.load(raw, base + n * entrySize + 8, 4))) }
        return Int(covered)
    }

    static func readFully(_ fd: Int32, _ buffer: inout [UInt8], at offset: Int) -> Bool {
        readUpTo(fd, &buffer, at: offset) == buffer.count
    }

    /// Fills `buffer` from `offset` of `fd` until it is full or the file
    /// ends; how many bytes it read (fewer on an error).
    static func readUpTo(_ fd: Int32, _ buffer: inout [UInt8], at offset: Int) -> Int {
        buffer.withUnsafeMutableBytes { readUpTo(fd, $0, at: offset) }
    }

    /// `readUpTo` into memory the caller holds.
    static func readUpTo(_ fd: Int32, _ bytes: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        var done = 0
        while done < bytes.count {
            let n = pread(fd, base + done, bytes.count - done, off_t(offset + done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            done += n
        }
        return done
    }
}

/// One process's segment being appended to. Not thread-safe: its owner
/// (`FlowLog.Writer`) serializes calls.
final class SegmentWriter {
    let path: String
    let name: String
    private let descriptor: Int32
    private(set) var length: Int
    private var entries: [(prefix: UInt64, offset: UInt32)] = []
    /// What `cache info` counts of each record appended (`SegmentFacts`), in `entries`' order.
    private var facts = SegmentFacts.Builder()
    /// Whether the segment's own name in `log/` is known durable.
    private var nameDurable = false
    private let inode: UInt64

    /// A new segment in `directory` (which must exist). Fails if the name
    /// exists: writer ids are unique, so that is another process's.
    init(directory: String, name: String) throws {
        (self.name, path) = (name, "\(directory)/\(name)")
        descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else { throw FPError.cannotWrite("\(path): \(Errno.describe(errno))") }
        // Held until the segment is closed: what tells a compaction on any node that
        // reads through the lock (a local file system, NFS's locks) that it is live.
        _ = flock(descriptor, LOCK_EX)
        var info = stat()
        fstat(descriptor, &info)
        inode = UInt64(info.st_ino)
        length = 0
        if let failure = LogSegment.magic.withUnsafeBytes({ writeAll(descriptor, $0) }) {
            // Closed by deinit, which runs once self is whole.
            unlink(path)
            throw FPError.cannotWrite("\(path): \(Errno.describe(failure))")
        }
        length = LogSegment.magic.count
        _ = Self.held.withLock { $0.insert(path) }
    }

    deinit {
        _ = Self.held.withLock { $0.remove(path) }
        close(descriptor)
    }

    /// The segments this process's writers hold open.
    static let held = Mutex<Set<String>>([])

    /// Past this, `isFull`.
    var rollBytes = LogSegment.rollBytes

    var isFull: Bool { length >= rollBytes }

    /// Whether this file is still the segment's name: a compaction (`prune`,
    /// `clear`, `verify --repair`, under the exclusive lock) copies what a
    /// segment holds and removes it; its writer then starts a new one.
    var stillPublished: Bool {
        var info = stat()
        return stat(path, &info) == 0 && UInt64(info.st_ino) == inode
    }

    /// Appends records (not synced). On failure the segment is cut back to
    /// what it held, so a later append never follows a torn record.
    func append(_ encoded: [UInt8], keys: [(prefix: UInt64, relativeOffset: Int)]) throws {
        let written = encoded.withUnsafeBytes { bytes -> Int32? in
            guard let base = bytes.baseAddress else { return nil }
            var done = 0
            while done < bytes.count {
                let n = pwrite(descriptor, base + done, bytes.count - done, off_t(length + done))
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            return nil
        }
        if let failure = written {
            _ = ftruncate(descriptor, off_t(length))
            throw FPError.cannotWrite("\(path): \(Errno.describe(failure))")
        }
        for key in keys { entries.append((key.prefix, UInt32(length + key.relativeOffset))) }
        encoded.withUnsafeBytes { raw in
            for key in keys { facts.add(raw, at: key.relativeOffset) }
        }
        length += encoded.count
    }

    /// Makes what was appended durable: the segment's bytes, and its name
    /// the first time.
    func sync(directory: String) throws {
        guard Platform.syncData(descriptor) else { throw FPError.cannotWrite("\(path): \(Errno.describe(errno))") }
        if !nameDurable {
            try AtomicFile.syncDirectory(directory)
            nameDurable = true
        }
    }

    /// The descriptor, for a `syncfs` of its file system.
    var fileDescriptor: Int32 { descriptor }

    /// Publishes the segment's facts (`SegmentFacts`, what `cache info`
    /// reads), then its index (each synced, as every published file is).
    /// The segment's bytes must be durable already. Facts that cannot be
    /// written cost `info` a walk of the segment, not the seal.
    func seal(directory: String) throws {
        // The index's order: by key, then offset; the facts follow it slot for slot.
        let order = entries.indices.sorted {
            (entries[$0].prefix, entries[$0].offset) < (entries[$1].prefix, entries[$1].offset)
        }
        if !facts.abandoned, facts.slots.count == entries.count, let stamp = SegmentFacts.Stamp.sealing(descriptor) {
            let encoded = SegmentFacts.encode(facts, order: order, covering: UInt64(length), stamp: stamp)
            if (try? AtomicFile.publish(Data(encoded), directory: directory, name: name + SegmentFacts.suffix)) == nil {
                unlink("\(directory)/\(name)\(SegmentFacts.suffix)")
            }
        }
        let index = SegmentIndex.encode(order.map { entries[$0] }, covering: UInt64(length))
        try AtomicFile.publish(Data(index), directory: directory, name: name + LogSegment.indexSuffix)
    }
}
