import Foundation

/// What `LogSurvey` knows of each record whose key prefix is met more than
/// once, between reading it and deciding it: partitioned by the first two
/// bytes of its fingerprint (uniform: a SHA-256) into up to `maxBuckets`
/// buckets of about `bucketBytes`, so that every record of one key lands in one bucket and
/// one bucket at a time is held to be decided. Each bucket's bytes wait in
/// `bufferBytes` pieces on one scratch file (`ScratchFile`, in `TMPDIR`);
/// with none to be had (a read-only root), in memory, which then grows with
/// the repeated records.
///
/// A record as a bucket holds it: part (4), offset (4), kind (1), serves
/// (1), resolved-at milliseconds (8), unique (8), fingerprint (32, zero for
/// an alias), placement length (4) and its bytes.
struct WeighedBuckets {
    /// One record read back from a bucket; its placement is a range of the bucket's bytes.
    struct Record {
        let part: UInt32
        let offset: UInt32
        let kind: UInt8
        let serves: Bool
        let stamp: (Int64, UInt64)
        let fingerprint: (UInt64, UInt64, UInt64, UInt64)
        /// Where its placement's bytes are in the bucket's bytes, and how many.
        let placementStart: UInt32
        let placementCount: UInt32

        var placement: Range<Int> { Int(placementStart)..<(Int(placementStart) + Int(placementCount)) }
    }

    /// About what a bucket holds when it is decided.
    static let bucketBytes = 2 << 20
    /// A bucket's bytes waiting to be written, at most.
    static let bufferBytes = 4 << 10
    /// Buckets at most (their buffers together 4 MiB): past this many
    /// buckets' worth of repeated records (about 27 million), each grows.
    static let maxBuckets = 1_024
    /// The fixed part of a record.
    static let recordHeader = 62

    /// How many buckets there are.
    let buckets: Int
    private var buffers: [[UInt8]]
    /// Each bucket's pieces: where in the scratch file, or (with none) the bytes themselves.
    private var pieces: [[(offset: Int, length: Int)]]
    private var held: [[UInt8]]
    private var spill: Int32 = -2
    private var written = 0

    private let bufferBytes: Int
    /// Where the scratch file goes (nil: `TMPDIR`, else /tmp).
    private let directory: String?

    /// Buckets for `records` records of about 80 bytes each.
    init(
        records: Int, bucketBytes: Int = WeighedBuckets.bucketBytes, bufferBytes: Int = WeighedBuckets.bufferBytes,
        directory: String? = nil
    ) {
        buckets = max(1, min(Self.maxBuckets, records * 80 / bucketBytes + 1))
        self.bufferBytes = bufferBytes
        self.directory = directory
        buffers = Array(repeating: [], count: buckets)
        pieces = Array(repeating: [], count: buckets)
        held = Array(repeating: [], count: buckets)
    }

    mutating func add(part: UInt32, offset: UInt32, _ view: LogRecord.View, serves: Bool) {
        let bucket = view.kind == .entry ? bucket(of: Int(view.fingerprint[0]) << 8 | Int(view.fingerprint[1])) : 0
        Self.encode(part: part, offset: offset, view, serves: serves, into: &buffers[bucket])
        if buffers[bucket].count >= bufferBytes { flush(bucket) }
    }

    /// The bucket of a fingerprint whose first two bytes are `prefix` (big
    /// endian): the buckets cut the prefixes' space into equal parts.
    func bucket(of prefix: Int) -> Int { (prefix * buckets) >> 16 }

    private static func encode(
        part: UInt32, offset: UInt32, _ view: LogRecord.View, serves: Bool, into out: inout [UInt8]
    ) {
        LogRecord.append(UInt64(part), 4, to: &out)
        LogRecord.append(UInt64(offset), 4, to: &out)
        out.append(view.kind.rawValue)
        out.append(serves ? 1 : 0)
        LogRecord.append(UInt64(bitPattern: view.stamp.0), 8, to: &out)
        LogRecord.append(view.stamp.1, 8, to: &out)
        if view.kind == .entry {
            out.append(contentsOf: view.fingerprint)
        } else {
            out.append(contentsOf: repeatElement(0, count: 32))
        }
        LogRecord.append(UInt64(view.placement.count), 4, to: &out)
        out.append(contentsOf: view.placement)
    }

    /// Each bucket's records, one bucket at a time, with the bytes their placements are ranges of.
    mutating func forEachBucket(_ body: (_ bytes: UnsafeRawBufferPointer, _ records: [Record]) -> Void) {
        defer {
            if spill >= 0 { close(spill) }
            spill = -2
        }
        // One bucket's bytes and records at a time, in memory kept from bucket to bucket (at their largest,
        // about 2 MiB each: made anew a bucket, each was mapped and faulted in again, hundreds of times at
        // ten million entries).
        var bytes: [UInt8] = []
        var records: [Record] = []
        for bucket in 0..<buckets {
            let fromFile = pieces[bucket].reduce(0) { $0 + $1.length }
            bytes.removeAll(keepingCapacity: true)
            bytes.reserveCapacity(fromFile + held[bucket].count + buffers[bucket].count)
            bytes.append(contentsOf: repeatElement(0, count: fromFile))
            var count = 0
            bytes.withUnsafeMutableBytes { out in
                for piece in pieces[bucket] {
                    let into = UnsafeMutableRawBufferPointer(rebasing: out[count..<(count + piece.length)])
                    guard SegmentIndex.readUpTo(spill, into, at: piece.offset) == piece.length else { continue }
                    count += piece.length
                }
            }
            bytes.removeLast(fromFile - count)
            bytes += held[bucket]
            bytes += buffers[bucket]
            (held[bucket], buffers[bucket], pieces[bucket]) = ([], [], [])
            bytes.withUnsafeBytes { raw in
                Self.records(raw, into: &records)
                body(raw, records)
            }
        }
    }

    /// A bucket's bytes as records (a piece cut short is where they end), in `records` (emptied first).
    private static func records(_ raw: UnsafeRawBufferPointer, into records: inout [Record]) {
        records.removeAll(keepingCapacity: true)
        records.reserveCapacity(raw.count / recordHeader)
        var at = 0
        while raw.count - at >= recordHeader {
            let length = Int(LogRecord.load(raw, at + 58, 4))
            guard raw.count - at - recordHeader >= length else { break }
            records.append(
                Record(
                    part: UInt32(LogRecord.load(raw, at, 4)), offset: UInt32(LogRecord.load(raw, at + 4, 4)),
                    kind: raw[at + 8], serves: raw[at + 9] != 0,
                    stamp: (Int64(bitPattern: LogRecord.load(raw, at + 10, 8)), LogRecord.load(raw, at + 18, 8)),
                    fingerprint: (
                        LogRecord.load(raw, at + 26, 8), LogRecord.load(raw, at + 34, 8),
                        LogRecord.load(raw, at + 42, 8), LogRecord.load(raw, at + 50, 8)
                    ),
                    placementStart: UInt32(at + recordHeader), placementCount: UInt32(length)))
            at += recordHeader + length
        }
    }

    /// A full buffer to the scratch file, or kept in memory when there is none.
    private mutating func flush(_ bucket: Int) {
        if spill == -2 { spill = (try? ScratchFile.open(in: directory)) ?? -1 }
        let buffer = buffers[bucket]
        buffers[bucket].removeAll(keepingCapacity: true)
        if spill >= 0, buffer.withUnsafeBytes({ writeAll(spill, $0) }) == nil {
            pieces[bucket].append((written, buffer.count))
            written += buffer.count
        } else {
            held[bucket] += buffer
        }
    }

    /// Whether two records are of one key: kind, fingerprint and placement, as bytes.
    static func sameKey(_ a: Record, _ b: Record, in bytes: UnsafeRawBufferPointer) -> Bool {
        // bytes-lint: the fingerprint is four integers, compared as its bytes.
        guard a.kind == b.kind, a.fingerprint == b.fingerprint, a.placement.count == b.placement.count else {
            return false
        }
        let x = UnsafeRawBufferPointer(rebasing: bytes[a.placement])
        let y = UnsafeRawBufferPointer(rebasing: bytes[b.placement])
        guard let p = x.baseAddress, let q = y.baseAddress else { return true }
        return memcmp(p, q, x.count) == 0
    }

    /// An order that puts the records of one key next to each other.
    static func keyOrder(_ a: Record, _ b: Record, in bytes: UnsafeRawBufferPointer) -> Bool {
        if a.kind != b.kind { return a.kind < b.kind }
        // bytes-lint: the fingerprint is four integers; any order that groups equal ones will do.
        if a.fingerprint != b.fingerprint {
            return (a.fingerprint.0, a.fingerprint.1, a.fingerprint.2, a.fingerprint.3)
                < (b.fingerprint.0, b.fingerprint.1, b.fingerprint.2, b.fingerprint.3)
        }
        let x = UnsafeRawBufferPointer(rebasing: bytes[a.placement])
        let y = UnsafeRawBufferPointer(rebasing: bytes[b.placement])
        return x.lexicographicallyPrecedes(y)
    }
}
