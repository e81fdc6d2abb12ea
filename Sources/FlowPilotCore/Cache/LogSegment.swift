import Foundation

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

    /// Every record of a segment's bytes from `offset` on, and how it ended:
    /// at the end of the bytes, in a torn record, or at a corrupt one.
    /// With `fingerprint` (32 bytes), only the records of that identity are
    /// parsed (a lookup's scan of a segment no index covers), the others
    /// skipped after their length and CRC are checked.
    static func records(
        in bytes: UnsafeRawBufferPointer, from offset: Int = magic.count, fingerprint: [UInt8]? = nil
    ) -> (records: [(offset: Int, record: LogRecord)], end: Int, problem: String?) {
        var found: [(offset: Int, record: LogRecord)] = []
        var offset = offset
        while offset < bytes.count {
            switch LogRecord.decode(bytes, at: offset, fingerprint: fingerprint) {
            case .skipped(let next):
                offset = next
            case .record(let record, let next):
                found.append((offset, record))
                offset = next
            case .torn: return (found, offset, "a torn last record at byte \(offset)")
            case .corrupt(let why): return (found, offset, "\(why) at byte \(offset)")
            }
        }
        return (found, offset, nil)
    }

    /// Whether what ends a segment's read at `end` is what a writer killed
    /// mid-append (or a power cut) leaves: a last record cut short, or
    /// nothing but zeroes to the end. Anything else is damage.
    static func isTornTail(_ bytes: UnsafeRawBufferPointer, at end: Int) -> Bool {
        if case .torn = LogRecord.decode(bytes, at: end) { return true }
        return bytes[end...].allSatisfy { $0 == 0 }
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
/// A lookup reads the header, the fanout and the keys of one first byte:
/// about 1 KiB and a few entries, whatever the segment holds. A record past
/// the covered length (none, in a segment sealed by its writer) is read by
/// scanning. A lookup trusts no index: the record an offset leads to must
/// pass its own CRC and match the whole key; `cache verify` checks the CRC.
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

    /// What a lookup of one key reads of an index file.
    struct Probe {
        let covered: UInt64
        let offsets: [UInt32]
    }

    /// The offsets of records whose key has `prefix`, reading the header,
    /// the fanout and one slice of `fd`; nil when the file is not an index
    /// (the lookup then scans the segment).
    static func probe(_ fd: Int32, prefix: UInt64) -> Probe? {
        var head = [UInt8](repeating: 0, count: headerSize + fanoutSize)
        guard readFully(fd, &head, at: 0) else { return nil }
        return head.withUnsafeBytes { bytes -> Probe? in
            guard zip(bytes.prefix(8), magic).allSatisfy({ $0 == $1 }) else { return nil }
            let covered = LogRecord.load(bytes, 8, 8)
            let count = LogRecord.load(bytes, 16, 4)
            let first = Int(prefix >> 56)
            let start = first == 0 ? 0 : LogRecord.load(bytes, headerSize + (first - 1) * 4, 4)
            let end = LogRecord.load(bytes, headerSize + first * 4, 4)
            guard start <= end, end <= count else { return nil }
            guard end > start else { return Probe(covered: covered, offsets: []) }
            var slice = [UInt8](repeating: 0, count: Int(end - start) * entrySize)
            guard readFully(fd, &slice, at: headerSize + fanoutSize + Int(start) * entrySize) else { return nil }
            var offsets: [UInt32] = []
            slice.withUnsafeBytes { entries in
                for index in 0..<Int(end - start) {
                    let base = index * entrySize
                    let key = (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(entries[base + $1]) }
                    if key == prefix { offsets.append(UInt32(LogRecord.load(entries, base + 8, 4))) }
                }
            }
            return Probe(covered: covered, offsets: offsets)
        }
    }

    /// Whether an index file's bytes are whole and agree with their CRC
    /// (`cache verify`); the length of the segment they cover.
    static func check(_ bytes: [UInt8]) -> UInt64? {
        guard bytes.count >= headerSize + fanoutSize + 4, Array(bytes.prefix(8)) == magic else { return nil }
        return bytes.withUnsafeBytes { raw -> UInt64? in
            let count = Int(LogRecord.load(raw, 16, 4))
            guard bytes.count == headerSize + fanoutSize + count * entrySize + 4,
                LogRecord.crc(UnsafeRawBufferPointer(rebasing: raw[..<(bytes.count - 4)]))
                    == UInt32(LogRecord.load(raw, bytes.count - 4, 4))
            else { return nil }
            return LogRecord.load(raw, 8, 8)
        }
    }

    static func readFully(_ fd: Int32, _ buffer: inout [UInt8], at offset: Int) -> Bool {
        readUpTo(fd, &buffer, at: offset) == buffer.count
    }

    /// Fills `buffer` from `offset` of `fd` until it is full or the file
    /// ends; how many bytes it read (fewer on an error).
    static func readUpTo(_ fd: Int32, _ buffer: inout [UInt8], at offset: Int) -> Int {
        buffer.withUnsafeMutableBytes { bytes -> Int in
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
}

/// One process's segment being appended to. Not thread-safe: its owner
/// (`FlowLog.Writer`) serializes calls.
final class SegmentWriter {
    let path: String
    let name: String
    private let descriptor: Int32
    private(set) var length: Int
    private var entries: [(prefix: UInt64, offset: UInt32)] = []
    /// Whether the segment's own name in `log/` is known durable.
    private var nameDurable = false
    private let inode: UInt64

    /// A new segment in `directory` (which must exist). Fails if the name
    /// exists: writer ids are unique, so that is another process's.
    init(directory: String, name: String) throws {
        (self.name, path) = (name, "\(directory)/\(name)")
        descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else { throw FPError.cannotWrite("\(path): \(Errno.describe(errno))") }
        var info = stat()
        fstat(descriptor, &info)
        inode = UInt64(info.st_ino)
        length = 0
        if let failure = LogSegment.magic.withUnsafeBytes({ writeAll(descriptor, $0) }) {
            close(descriptor)
            unlink(path)
            throw FPError.cannotWrite("\(path): \(Errno.describe(failure))")
        }
        length = LogSegment.magic.count
    }

    deinit { close(descriptor) }

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

    /// After a `syncfs` made the bytes and the name durable.
    func markSynced() { nameDurable = true }

    /// Publishes the index (synced, as every published file is). The
    /// segment's bytes must be durable already.
    func seal(directory: String) throws {
        let index = SegmentIndex.encode(entries, covering: UInt64(length))
        try AtomicFile.publish(Data(index), directory: directory, name: name + LogSegment.indexSuffix)
    }
}
