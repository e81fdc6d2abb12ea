import Crypto
import Foundation
import Synchronization

/// One record of a format-2 cache's log (docs/cache-format.md, "Format 2"):
/// a flow entry's metadata, pointing at its flow's bytes in `objects/` by
/// their SHA-256, or a placement's last-known-good alias pointing at a key.
///
/// On disk a record is `u32 length, u32 CRC-32 of the body, body`, little
/// endian, the body:
///
///     u8 kind (1 entry, 2 alias)   u8 tier (0 cache ... 3 bundled_default)
///     i64 resolved_at, milliseconds since 1970   u64 unique (orders records of one millisecond)
///     u32 ttl seconds   32 bytes fingerprint (the identity's SHA-256)
///     entry only: 32 bytes flow SHA-256, u32 flow size, content hash (below)
///     strings, each a LEB128 length and UTF-8: placement, user id; entry only: flow id, version
///
/// The content hash is a byte saying its form (0 none, 1 `sha256:` and 32
/// bytes, 2 a string as above). Nothing is shortened or hashed: a field of
/// any length the backend sends is kept whole.
public struct LogRecord: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case entry = 1
        case alias = 2
    }

    public var kind: Kind
    public var tier: Tier
    public var resolvedAtMillis: Int64
    public var unique: UInt64
    public var ttlSeconds: UInt32
    /// Lowercase hex, 64 digits.
    public var fingerprint: String
    public var placement: String
    public var userID: String
    // Entry only (empty, zero or nil in an alias).
    /// Lowercase hex SHA-256 of the flow's canonical JSON: its name in `objects/`.
    public var flowSHA256: String
    public var flowSize: UInt32
    public var contentHash: String?
    public var flowID: String
    public var version: String

    public init(
        kind: Kind, tier: Tier, resolvedAtMillis: Int64, unique: UInt64, ttlSeconds: UInt32, fingerprint: String,
        placement: String, userID: String, flowSHA256: String = "", flowSize: UInt32 = 0, contentHash: String? = nil,
        flowID: String = "", version: String = ""
    ) {
        (self.kind, self.tier, self.resolvedAtMillis, self.unique) = (kind, tier, resolvedAtMillis, unique)
        (self.ttlSeconds, self.fingerprint, self.placement, self.userID) = (ttlSeconds, fingerprint, placement, userID)
        (self.flowSHA256, self.flowSize, self.contentHash) = (flowSHA256, flowSize, contentHash)
        (self.flowID, self.version) = (flowID, version)
    }

    /// The key a record is found by: an entry's (placement, fingerprint), an
    /// alias's placement. The first 8 bytes of `SHA-256(kind, placement, 0,
    /// fingerprint)` (an alias: `SHA-256(kind, placement)`), big endian, are
    /// what a segment's index sorts.
    public var key: LogKey {
        kind == .entry ? .entry(placement: placement, fingerprint: fingerprint) : .alias(placement: placement)
    }

    /// Newer records sort after older ones: by time, then `unique`.
    public func isNewer(than other: LogRecord) -> Bool {
        (resolvedAtMillis, unique) > (other.resolvedAtMillis, other.unique)
    }

    /// Whether this record is the one a reader takes over `other` of the
    /// same key at `now` (milliseconds): the newer, except that a record
    /// from the future (resolved more than `CachedFlow.clockSkew` ahead of
    /// `now`: its writer's clock ran ahead) loses to any that is not, so the
    /// next write by a writer with a right clock replaces it
    /// (docs/cache-format.md, "Time").
    public func wins(over other: LogRecord, now: Int64) -> Bool {
        Self.wins((resolvedAtMillis, unique), over: (other.resolvedAtMillis, other.unique), now: now)
    }

    /// `wins(over:now:)` of two records' (`resolved_at`, `unique`).
    static func wins(_ stamp: (Int64, UInt64), over other: (Int64, UInt64), now: Int64) -> Bool {
        let limit = now + Int64(CachedFlow.clockSkew * 1000)
        let (future, otherFuture) = (stamp.0 > limit, other.0 > limit)
        if future != otherFuture { return otherFuture }
        return stamp > other
    }

    /// The reader's clock in milliseconds, for `wins`.
    static var nowMillis: Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    public var resolvedAt: Date { Self.date(millis: resolvedAtMillis) }

    /// A `resolved_at` in milliseconds as a date.
    static func date(millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }

    static let headerSize = 8
    /// Bodies larger than this are not records (a length read from garbage).
    static let maxBodySize = 1 << 20
    static let minimumBodySize = 1 + 1 + 8 + 8 + 4 + 32 + 2

    /// Appends the record, header and body, to `out`.
    func encode(into out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: Self.headerSize))
        out.append(kind.rawValue)
        out.append(UInt8(tier.number))
        Self.append(UInt64(bitPattern: resolvedAtMillis), 8, to: &out)
        Self.append(unique, 8, to: &out)
        Self.append(UInt64(ttlSeconds), 4, to: &out)
        Self.appendHex(fingerprint, to: &out)
        if kind == .entry {
            Self.appendHex(flowSHA256, to: &out)
            Self.append(UInt64(flowSize), 4, to: &out)
            if let contentHash {
                // 1 and the 32 bytes of "sha256:" and 64 hex digits; else 2 and the string.
                let form = out.count
                out.append(1)
                out.append(contentsOf: repeatElement(0, count: 32))
                // By bytes: `dropFirst` of the string itself walks characters.
                if !contentHash.utf8.starts(with: "sha256:".utf8)
                    || !Self.decodeHex(Substring(contentHash.utf8.dropFirst(7)), into: &out, at: form + 1)
                {
                    out.removeSubrange(form...)
                    out.append(2)
                    Self.appendString(contentHash, to: &out)
                }
            } else {
                out.append(0)
            }
        }
        Self.appendString(placement, to: &out)
        Self.appendString(userID, to: &out)
        if kind == .entry {
            Self.appendString(flowID, to: &out)
            Self.appendString(version, to: &out)
        }
        let bodyCount = out.count - start - Self.headerSize
        let crc = out.withUnsafeBytes { Self.crc(UnsafeRawBufferPointer(rebasing: $0[(start + 8)...])) }
        Self.store(UInt64(bodyCount), 4, at: start, in: &out)
        Self.store(UInt64(crc), 4, at: start + 4, in: &out)
    }

    /// What `decode` found at an offset.
    enum Decoded {
        /// A whole record and the offset after it.
        /// A whole record, read in place: valid while the bytes are.
        case record(View, next: Int)
        /// The bytes end inside a record: a write cut short (a killed writer),
        /// or a writer appending right now.
        case torn
        /// A length out of range, a CRC that does not match, or a body that
        /// does not parse: nothing after it in the segment is trusted.
        case corrupt(String)
        /// A whole record of another identity than the one asked for, not parsed.
        case skipped(next: Int)
    }

    /// Where a body's fingerprint starts: after the kind, tier, time, unique and TTL.
    static let fingerprintOffset = 1 + 1 + 8 + 8 + 4

    /// The record at `offset` of `bytes`; with `fingerprint`, a record of
    /// another identity is only checked (length, CRC) and skipped.
    static func decode(_ bytes: UnsafeRawBufferPointer, at offset: Int, fingerprint: [UInt8]? = nil) -> Decoded {
        guard bytes.count - offset >= headerSize else { return .torn }
        let length = Int(load(bytes, offset, 4))
        let crc = UInt32(load(bytes, offset + 4, 4))
        guard length >= minimumBodySize, length <= maxBodySize else {
            // A zero length is where a file system extended the file and the bytes never came.
            return .corrupt(length == 0 ? "zeroed bytes" : "a record length of \(length)")
        }
        let bodyStart = offset + headerSize
        guard bytes.count - bodyStart >= length else { return .torn }
        let body = UnsafeRawBufferPointer(rebasing: bytes[bodyStart..<(bodyStart + length)])
        guard Self.crc(body) == crc else { return .corrupt("CRC mismatch") }
        if let fingerprint, fingerprint.count == 32,
            !zip(fingerprint, body[fingerprintOffset..<(fingerprintOffset + 32)]).allSatisfy({ $0 == $1 })
        {
            return .skipped(next: bodyStart + length)
        }
        guard let view = View(body) else { return .corrupt("a body that does not parse") }
        return .record(view, next: bodyStart + length)
    }

    /// Where reading goes on after damage at `offset`: the first later
    /// offset where a whole record starts (its length in range, its kind and
    /// tier known, its CRC holding, its body parsing to exactly its length),
    /// nil when none does. A damaged byte so costs the record it is in, as
    /// LevelDB's log costs a block: a false start needs a CRC-32 to match by
    /// chance on top of the shape checks.
    static func resynchronize(_ bytes: UnsafeRawBufferPointer, after offset: Int) -> Int? {
        var candidate = offset + 1
        while bytes.count - candidate >= headerSize + minimumBodySize {
            let length = Int(load(bytes, candidate, 4))
            let bodyStart = candidate + headerSize
            if length >= minimumBodySize, length <= maxBodySize, bytes.count - bodyStart >= length,
                Kind(rawValue: bytes[bodyStart]) != nil, bytes[bodyStart + 1] <= 3,
                case .record = decode(bytes, at: candidate)
            {
                return candidate
            }
            candidate += 1
        }
        return nil
    }

    /// The key prefix of each whole record from `offset` on, and the offset
    /// where they end (at a torn record, or at damage no whole record
    /// follows; `resynchronize` reads on past damage, as `LogSegment.records`
    /// does): what indexing a segment's unsealed tail needs, without making a
    /// `LogRecord` (its hex and strings) of each. A record is checked as
    /// `decode` checks it (length, CRC, every field within the body, nothing
    /// after the last) but for its strings' UTF-8, which the lookup that reads
    /// it checks.
    static func keyPrefixes(_ bytes: UnsafeRawBufferPointer, from offset: Int) -> (
        keys: [(offset: Int, prefix: UInt64)], end: Int
    ) {
        var keys: [(offset: Int, prefix: UInt64)] = []
        var offset = offset
        var digits = [UInt8](repeating: 0, count: 64)
        while bytes.count - offset >= headerSize {
            let length = Int(load(bytes, offset, 4))
            let bodyStart = offset + headerSize
            let inRange = length >= minimumBodySize && length <= maxBodySize
            if inRange && bytes.count - bodyStart < length { break }
            var prefix: UInt64?
            if inRange {
                let body = UnsafeRawBufferPointer(rebasing: bytes[bodyStart..<(bodyStart + length)])
                if Self.crc(body) == UInt32(load(bytes, offset + 4, 4)) { prefix = keyPrefix(body, digits: &digits) }
            }
            guard let prefix else {
                // Damage in the middle (whole bytes that fail their checks): read on after it. Bytes
                // that end inside a record are a writer's append in progress, read again next time.
                guard let next = resynchronize(bytes, after: offset) else { break }
                offset = next
                continue
            }
            keys.append((offset, prefix))
            offset = bodyStart + length
        }
        return (keys, offset)
    }

    /// The key prefix of a record read whole (`View`): `digits` is 64 bytes of scratch.
    static func keyPrefix(of view: View, digits: inout [UInt8]) -> UInt64 {
        let fingerprint = view.fingerprint
        for index in 0..<32 {
            digits[2 * index] = Digest.digit(fingerprint[index] >> 4)
            digits[2 * index + 1] = Digest.digit(fingerprint[index] & 0xF)
        }
        return digits.withUnsafeBytes { hex in LogKey.prefix(kind: view.kind, placement: view.placement, digits: hex) }
    }

    private static func keyPrefix(_ body: UnsafeRawBufferPointer, digits: inout [UInt8]) -> UInt64? {
        guard let kind = Kind(rawValue: body[0]), Tier.allCases.contains(where: { $0.number == Int(body[1]) }) else {
            return nil
        }
        var reader = Reader(bytes: body, offset: fingerprintOffset)
        guard reader.skip(32) else { return nil }
        if kind == .entry {
            guard reader.skip(32 + 4), let form = reader.byte() else { return nil }
            switch form {
            case 0: break
            case 1: guard reader.skip(32) else { return nil }
            case 2: guard reader.stringRange() != nil else { return nil }
            default: return nil
            }
        }
        guard let placement = reader.stringRange(), reader.stringRange() != nil else { return nil }
        if kind == .entry { guard reader.stringRange() != nil, reader.stringRange() != nil else { return nil } }
        guard reader.atEnd else { return nil }
        for index in 0..<32 {
            let b = body[fingerprintOffset + index]
            digits[2 * index] = Digest.digit(b >> 4)
            digits[2 * index + 1] = Digest.digit(b & 0xF)
        }
        return digits.withUnsafeBytes { hex in
            LogKey.prefix(kind: kind, placement: UnsafeRawBufferPointer(rebasing: body[placement]), digits: hex)
        }
    }

    /// A whole record's fields where its bytes are, no string made: what a
    /// walk of the whole log reads of each record (`cache info`, `list`,
    /// `verify`, `prune`, the survey), which makes a `LogRecord` only of
    /// those it keeps. Checked as a `LogRecord` is (every field within the
    /// body, its strings UTF-8, nothing after the last): a body is a view
    /// exactly when it parses to a record.
    struct View {
        let body: UnsafeRawBufferPointer
        let kind: Kind
        let tier: Tier
        /// 0 no content hash, 1 `sha256:` and its 32 bytes, 2 a string.
        let contentForm: UInt8
        let contentHash: Range<Int>
        let placementRange: Range<Int>
        let userIDRange: Range<Int>
        let flowIDRange: Range<Int>
        let versionRange: Range<Int>

        var resolvedAtMillis: Int64 { Int64(bitPattern: LogRecord.load(body, 2, 8)) }
        var unique: UInt64 { LogRecord.load(body, 10, 8) }
        var ttlSeconds: UInt32 { UInt32(LogRecord.load(body, 18, 4)) }
        var stamp: (Int64, UInt64) { (resolvedAtMillis, unique) }
        /// The identity's 32 bytes (an alias's: its target's).
        var fingerprint: UnsafeRawBufferPointer { slice(fingerprintOffset..<(fingerprintOffset + 32)) }
        /// An entry's flow SHA-256, 32 bytes (empty in an alias).
        var flowSHA256: UnsafeRawBufferPointer { slice(kind == .entry ? 54..<86 : 0..<0) }
        var flowSize: UInt32 { kind == .entry ? UInt32(LogRecord.load(body, 86, 4)) : 0 }
        var placement: UnsafeRawBufferPointer { slice(placementRange) }
        var userID: UnsafeRawBufferPointer { slice(userIDRange) }
        var flowID: UnsafeRawBufferPointer { slice(flowIDRange) }

        func slice(_ range: Range<Int>) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: body[range]) }

        /// The record, its strings and hex made.
        var record: LogRecord {
            func text(_ range: Range<Int>) -> String { String(decoding: slice(range), as: UTF8.self) }
            var record = LogRecord(
                kind: kind, tier: tier, resolvedAtMillis: resolvedAtMillis, unique: unique, ttlSeconds: ttlSeconds,
                fingerprint: Digest.hex(fingerprint), placement: text(placementRange), userID: text(userIDRange))
            if kind == .entry {
                (record.flowSHA256, record.flowSize) = (Digest.hex(flowSHA256), flowSize)
                switch contentForm {
                case 1: record.contentHash = "sha256:" + Digest.hex(slice(contentHash))
                case 2: record.contentHash = text(contentHash)
                default: record.contentHash = nil
                }
                (record.flowID, record.version) = (text(flowIDRange), text(versionRange))
            }
            return record
        }

        /// The body's view, nil when it does not parse as a record.
        init?(_ body: UnsafeRawBufferPointer) {
            var reader = Reader(bytes: body)
            guard let kindByte = reader.byte(), let kind = Kind(rawValue: kindByte), let tierByte = reader.byte(),
                let tier = Tier.allCases.first(where: { $0.number == Int(tierByte) }),
                reader.skip(8 + 8 + 4 + 32)
            else { return nil }
            var (form, hash): (UInt8, Range<Int>) = (0, 0..<0)
            if kind == .entry {
                guard reader.skip(32 + 4), let byte = reader.byte() else { return nil }
                form = byte
                switch form {
                case 0: break
                case 1:
                    guard reader.skip(32) else { return nil }
                    hash = (reader.offset - 32)..<reader.offset
                case 2:
                    guard let range = reader.utf8Range() else { return nil }
                    hash = range
                default: return nil
                }
            }
            guard let placement = reader.utf8Range(), let user = reader.utf8Range() else { return nil }
            var (flowID, version) = (0..<0, 0..<0)
            if kind == .entry {
                guard let id = reader.utf8Range(), let named = reader.utf8Range() else { return nil }
                (flowID, version) = (id, named)
            }
            guard reader.atEnd else { return nil }
            (self.body, self.kind, self.tier, contentForm, contentHash) = (body, kind, tier, form, hash)
            (placementRange, userIDRange, flowIDRange, versionRange) = (placement, user, flowID, version)
        }
    }

    static func crc(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32()
        crc.update(bytes)
        return crc.value
    }

    static func load(_ bytes: UnsafeRawBufferPointer, _ offset: Int, _ width: Int) -> UInt64 {
        precondition(offset >= 0 && bytes.count - offset >= width)
        switch width {
        case 8: return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        case 4: return UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        default: break
        }
        var value: UInt64 = 0
        for index in stride(from: width - 1, through: 0, by: -1) { value = value << 8 | UInt64(bytes[offset + index]) }
        return value
    }

    static func append(_ value: UInt64, _ width: Int, to out: inout [UInt8]) {
        // The low `width` bytes of its little-endian form, appended in one piece.
        withUnsafeBytes(of: value.littleEndian) { bytes in
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<width]))
        }
    }

    static func store(_ value: UInt64, _ width: Int, at offset: Int, in out: inout [UInt8]) {
        for index in 0..<width { out[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
    }

    private static func appendString(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { utf8 in
            var length = UInt64(utf8.count)
            repeat {
                let low = UInt8(length & 0x7F)
                length >>= 7
                out.append(length == 0 ? low : low | 0x80)
            } while length != 0
            out.append(contentsOf: utf8)
        }
    }

    /// 64 hex digits as 32 bytes; anything else (it never is: fingerprints and
    /// flow digests are made here) as zeros, which no reader takes for a match.
    private static func appendHex(_ hex: String, to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: 32))
        if !decodeHex(Substring(hex), into: &out, at: start) {
            out.replaceSubrange(start..<(start + 32), with: repeatElement(0, count: 32))
        }
    }

    static func rawHex(_ hex: Substring) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 32)
        return decodeHex(hex, into: &out, at: 0) ? out : nil
    }

    /// 64 lowercase hex digits into `out[at..<at + 32]`; false for anything else.
    private static func decodeHex(_ hex: Substring, into out: inout [UInt8], at: Int) -> Bool {
        var hex = hex
        return hex.withUTF8 { digits in
            guard digits.count == 64, at >= 0, out.count >= at + 32 else { return false }
            return out.withUnsafeMutableBytes { bytes in
                var good = true
                for piece in 0..<8 {
                    let word = UnsafeRawBufferPointer(digits).loadUnaligned(fromByteOffset: 8 * piece, as: UInt64.self)
                    guard let value = hex8(UInt64(littleEndian: word)) else {
                        good = false
                        break
                    }
                    bytes.storeBytes(of: value.littleEndian, toByteOffset: at + 4 * piece, as: UInt32.self)
                }
                return good
            }
        }
    }

    /// Eight lowercase hex digits, the first in the low byte, as the four
    /// bytes they spell (the first in the low byte); nil when any is not one.
    /// All eight at once in one word: each byte's range is told by the carry
    /// into its top bit of an addition no byte can overflow (every byte is
    /// below 0x80 first).
    static func hex8(_ word: UInt64) -> UInt32? {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let tops: UInt64 = 0x8080_8080_8080_8080
        guard word & tops == 0 else { return nil }
        let atLeast30 = (word &+ ones &* 0x50) & tops
        let below3A = ~(word &+ ones &* 0x46) & tops
        let atLeast61 = (word &+ ones &* 0x1F) & tops
        let below67 = ~(word &+ ones &* 0x19) & tops
        let letters = atLeast61 & below67
        guard (atLeast30 & below3A) | letters == tops else { return nil }
        // '0'-'9' are 0x30-0x39 and 'a'-'f' 0x61-0x66: the low four bits, and 9 more for a letter.
        let nibbles = (word & (ones &* 0x0F)) &+ (letters >> 7) &* 9
        // Byte k holds digit k: pairs (2i, 2i + 1) make byte i, then the even bytes are gathered.
        var pairs = ((nibbles << 4) | (nibbles >> 8)) & 0x00FF_00FF_00FF_00FF
        pairs = (pairs | (pairs >> 8)) & 0x0000_FFFF_0000_FFFF
        pairs = (pairs | (pairs >> 16)) & 0x0000_0000_FFFF_FFFF
        return UInt32(truncatingIfNeeded: pairs)
    }

    /// One digit's value, byte by byte: what `hex8` does eight at a time (its tests' reference).
    static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        default: nil
        }
    }

    /// Reads a body front to back; nil past its end.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var atEnd: Bool { offset == bytes.count }

        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func integer(_ width: Int) -> UInt64? {
            guard bytes.count - offset >= width else { return nil }
            defer { offset += width }
            return LogRecord.load(bytes, offset, width)
        }

        mutating func hex(_ count: Int) -> String? {
            guard bytes.count - offset >= count else { return nil }
            defer { offset += count }
            return Digest.hex(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
        }

        mutating func skip(_ count: Int) -> Bool {
            guard bytes.count - offset >= count else { return false }
            offset += count
            return true
        }

        /// Where the next string's UTF-8 lies, not checked as UTF-8.
        mutating func stringRange() -> Range<Int>? {
            var length: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard let byte = byte(), shift < 35 else { return nil }
                length |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { break }
                shift += 7
            }
            guard length <= UInt64(bytes.count - offset) else { return nil }
            defer { offset += Int(length) }
            return offset..<(offset + Int(length))
        }

        /// Where the next string's UTF-8 lies, nil unless it is UTF-8
        /// (checked eight bytes at a time while they are ASCII).
        mutating func utf8Range() -> Range<Int>? {
            guard let range = stringRange() else { return nil }
            var at = range.lowerBound
            while range.upperBound - at >= 8 {
                if bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { break }
                at += 8
            }
            while at < range.upperBound && bytes[at] < 0x80 { at += 1 }
            if at == range.upperBound { return range }
            let rest = UnsafeRawBufferPointer(rebasing: bytes[at..<range.upperBound])
            return String(validating: rest, as: UTF8.self) == nil ? nil : range
        }
    }
}

/// What a lookup finds records by: an entry's (placement, fingerprint) or a
/// placement's alias, as the 8-byte prefix of its SHA-256 that segment
/// indexes sort, and the whole of it to tell a record of the key from one
/// whose prefix only collides.
public struct LogKey: Sendable, Hashable {
    public let prefix: UInt64
    let kind: LogRecord.Kind
    let placement: String
    let fingerprint: String

    /// An entry's key: its prefix from `Recent` when the same key was made
    /// lately (a warm makes each twice: its lookup, then its record).
    public static func entry(placement: String, fingerprint: String) -> LogKey {
        if let prefix = Recent.shared.prefix(placement: placement, fingerprint: fingerprint) {
            return LogKey(prefix: prefix, kind: .entry, placement: placement, fingerprint: fingerprint)
        }
        let key = LogKey(kind: .entry, placement: placement, fingerprint: fingerprint)
        Recent.shared.remember(key)
        return key
    }

    private init(prefix: UInt64, kind: LogRecord.Kind, placement: String, fingerprint: String) {
        (self.prefix, self.kind, self.placement, self.fingerprint) = (prefix, kind, placement, fingerprint)
    }

    /// The entry keys made lately, in a table of `size` slots, each slot
    /// chosen by the fingerprint's first hex digits and the placement's
    /// length: a key is found again only when its placement and fingerprint
    /// are the same strings (a memo of a pure function), at the cost of a
    /// comparison, where its SHA-256 cost two blocks. Large enough that the
    /// keys a warm makes between an identity's lookup and its record (a few
    /// hundred, its batches in flight) seldom take the slot first: at 2,048
    /// slots a quarter of a warm's records hashed their key again.
    final class Recent: Sendable {
        static let shared = Recent()
        static let size = 8192
        private let slots = Mutex(
            [(placement: String, fingerprint: String, prefix: UInt64)?](repeating: nil, count: size))

        /// The fingerprint's first four hex digits' values (uniform: a SHA-256's), mixed with the placement's length.
        static func slot(_ placement: String, _ fingerprint: String) -> Int {
            var fingerprint = fingerprint
            let digits = fingerprint.withUTF8 { utf8 in
                // A lowercase hex digit's value: '0'-'9' are 0x30-0x39, 'a'-'f' 0x61-0x66 (9 more than their low bits).
                utf8.prefix(4).reduce(0) { $0 << 4 | Int(($1 &+ ($1 >> 6) &* 9) & 0x0F) }
            }
            return (digits ^ (placement.utf8.count &* 0x9E5)) & (size - 1)
        }

        func prefix(placement: String, fingerprint: String) -> UInt64? {
            let slot = Self.slot(placement, fingerprint)
            return slots.withLock { slots in
                guard let known = slots[slot], known.fingerprint.sameBytes(as: fingerprint),
                    known.placement.sameBytes(as: placement)
                else { return nil }
                return known.prefix
            }
        }

        func remember(_ key: LogKey) {
            let slot = Self.slot(key.placement, key.fingerprint)
            slots.withLock { $0[slot] = (key.placement, key.fingerprint, key.prefix) }
        }
    }

    public static func alias(placement: String) -> LogKey {
        LogKey(kind: .alias, placement: placement, fingerprint: "")
    }

    private init(kind: LogRecord.Kind, placement: String, fingerprint: String) {
        (self.kind, self.placement, self.fingerprint) = (kind, placement, fingerprint)
        var (placement, fingerprint) = (placement, fingerprint)
        prefix = placement.withUTF8 { name in
            fingerprint.withUTF8 { digits in
                Self.prefix(kind: kind, placement: UnsafeRawBufferPointer(name), digits: UnsafeRawBufferPointer(digits))
            }
        }
    }

    /// The first 8 bytes, big endian, of `SHA-256(kind, placement, 0,
    /// fingerprint digits)` (an alias: `SHA-256(kind, placement)`), hashed in
    /// one call over one buffer.
    static func prefix(kind: LogRecord.Kind, placement: UnsafeRawBufferPointer, digits: UnsafeRawBufferPointer)
        -> UInt64
    {
        let count = 1 + placement.count + (kind == .entry ? 1 + digits.count : 0)
        return withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { input in
            input[0] = kind.rawValue
            UnsafeMutableRawBufferPointer(rebasing: input[1...]).copyMemory(from: placement)
            if kind == .entry {
                input[1 + placement.count] = 0
                UnsafeMutableRawBufferPointer(rebasing: input[(2 + placement.count)...]).copyMemory(from: digits)
            }
            var hasher = SHA256()
            hasher.update(bufferPointer: UnsafeRawBufferPointer(input))
            return hasher.finalize().withUnsafeBytes { digest in
                (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(digest[$1]) }
            }
        }
    }

    /// The fingerprint's 32 bytes: what a scan compares before parsing a record.
    var rawFingerprint: [UInt8]? { kind == .entry ? LogRecord.rawHex(Substring(fingerprint)) : nil }

    /// Whether `record` is of this key (not only of its prefix).
    func matches(_ record: LogRecord) -> Bool {
        record.kind == kind && record.placement.sameBytes(as: placement)
            && (kind == .alias || record.fingerprint.sameBytes(as: fingerprint))
    }
}
