import Foundation

/// The MS-DOS date and time zip headers carry (2-second resolution, UTC here).
enum ZipDate {
    /// 1980-01-01T00:00:00Z and 2108-01-01T00:00:00Z: what a DOS date can hold.
    static let range: Range<TimeInterval> = 315_532_800..<4_354_819_200

    static func contains(_ date: Date) -> Bool { range.contains(date.timeIntervalSince1970) }

    /// The header's (date, time) fields, or nil for a time outside `range`.
    static func dos(_ date: Date) -> (date: UInt16, time: UInt16)? {
        guard contains(date) else { return nil }
        var t = time_t(date.timeIntervalSince1970)
        var tm = tm()
        gmtime_r(&t, &tm)
        let day = (Int(tm.tm_year) + 1900 - 1980) << 9 | Int(tm.tm_mon + 1) << 5 | Int(tm.tm_mday)
        let time = Int(tm.tm_hour) << 11 | Int(tm.tm_min) << 5 | Int(tm.tm_sec) / 2
        return (UInt16(day), UInt16(time))
    }
}

/// The canonical form of a bundle's zip headers, field by field, so a header
/// that differs is reported by the field that differs and both values
/// (docs/bundle-format.md lists the same fields, byte for byte).
enum CanonicalHeader {
    enum Field {
        case u16(String, UInt16)
        case u32(String, UInt32)

        var name: String {
            switch self {
            case .u16(let name, _), .u32(let name, _): name
            }
        }
        var width: Int {
            switch self {
            case .u16: 2
            case .u32: 4
            }
        }
        var value: UInt32 {
            switch self {
            case .u16(_, let v): UInt32(v)
            case .u32(_, let v): v
            }
        }
    }

    /// What the canonical headers of one entry follow from.
    struct Entry {
        let name: [UInt8]
        /// 0 (stored) or 8 (deflate).
        let method: UInt16
        let crc32: UInt32
        let compressedSize: UInt32
        let size: UInt32
        let localHeaderOffset: UInt32

        /// `NEEDED`: 1.0 for a stored entry, 2.0 (deflate) for a deflated one.
        var versionNeeded: UInt16 { stored ? 10 : 20 }
        var stored: Bool { method == 0 }
    }

    /// `FLAGS`: sizes and CRC-32 follow the data in a data descriptor.
    static let flags = ZipFlag.dataDescriptor
    /// Regular file, rw-r--r--, in the high half (Unix).
    static let externalAttributes: UInt32 = 0o100644 << 16

    /// The local header's fixed fields (docs/bundle-format.md, "Local header").
    static func localHeader(_ e: Entry, dos: (date: UInt16, time: UInt16), extraLength: UInt16) -> [Field] {
        [
            .u32("signature", ZipSignature.localHeader), .u16("version needed", e.versionNeeded),
            .u16("flags", flags), .u16("method", e.method), .u16("mod time", dos.time),
            .u16("mod date", dos.date), .u32("crc32", 0), .u32("compressed size", e.stored ? e.size : 0),
            .u32("size", e.size), .u16("name length", UInt16(e.name.count)), .u16("extra length", extraLength),
        ]
    }

    /// The central record's fixed fields (docs/bundle-format.md, "Central record").
    static func centralRecord(_ e: Entry, dos: (date: UInt16, time: UInt16), extraLength: UInt16) -> [Field] {
        [
            .u32("signature", ZipSignature.centralRecord), .u16("version made by", 0x0300 | e.versionNeeded),
            .u16("version needed", e.versionNeeded), .u16("flags", flags), .u16("method", e.method),
            .u16("mod time", dos.time), .u16("mod date", dos.date), .u32("crc32", e.crc32),
            .u32("compressed size", e.compressedSize), .u32("size", e.size),
            .u16("name length", UInt16(e.name.count)), .u16("extra length", extraLength),
            .u16("comment length", 0), .u16("disk number", 0), .u16("internal attributes", 0),
            .u32("external attributes", externalAttributes),
            .u32("local header offset", e.localHeaderOffset),
        ]
    }

    /// The data descriptor after each entry's data, with its signature.
    static func dataDescriptor(_ e: Entry) -> [Field] {
        [
            .u32("signature", ZipSignature.dataDescriptor), .u32("crc32", e.crc32),
            .u32("compressed size", e.compressedSize), .u32("size", e.size),
        ]
    }

    /// The end of central directory record (docs/bundle-format.md, "End record").
    static func endRecord(entries: UInt16, centralSize: UInt32, centralOffset: UInt32) -> [Field] {
        [
            .u32("signature", ZipSignature.endRecord), .u16("disk number", 0),
            .u16("disk with the central directory", 0), .u16("entries on this disk", entries),
            .u16("entries", entries), .u32("central directory size", centralSize),
            .u32("central directory offset", centralOffset), .u16("comment length", 0),
        ]
    }

    /// The bytes of a record: its fixed fields little-endian, then the name and
    /// the extra fields (each id, size, data) when it has them.
    static func encode(_ fields: [Field], name: [UInt8] = [], extra: [(id: UInt16, data: [UInt8])] = []) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(fields.count * 4 + name.count + extra.reduce(0) { $0 + 4 + $1.data.count })
        for field in fields {
            for i in 0..<field.width { out.append(UInt8(truncatingIfNeeded: field.value >> (8 * i))) }
        }
        out += name
        for (id, data) in extra {
            out += [UInt8(id & 0xFF), UInt8(id >> 8), UInt8(data.count & 0xFF), UInt8(data.count >> 8)]
            out += data
        }
        return out
    }

    /// The extra fields' encoded length.
    static func length(of extra: [(id: UInt16, data: [UInt8])]) -> UInt16 {
        UInt16(extra.reduce(0) { $0 + 4 + $1.data.count })
    }

    /// The two extra fields every entry carries: extended timestamp (0x5455,
    /// mtime = created_at) and Info-ZIP Unix uid/gid (0x7875, both 0).
    static func extraFields(createdAt: Date) -> [(id: UInt16, data: [UInt8])] {
        let t = UInt32(truncatingIfNeeded: Int64(createdAt.timeIntervalSince1970))
        return [
            (0x5455, [0x01, UInt8(t & 0xFF), UInt8(t >> 8 & 0xFF), UInt8(t >> 16 & 0xFF), UInt8(t >> 24)]),
            (0x7875, [0x01, 0x04, 0, 0, 0, 0, 0x04, 0, 0, 0, 0]),
        ]
    }

    /// The first field of `actual` that is not canonical, as
    /// "RECORD: FIELD 0x… (canonical 0x…)"; nil when every byte is canonical.
    static func difference(
        _ record: String, fixed: [Field], name: [UInt8]?, extra: [(id: UInt16, data: [UInt8])]?, actual: [UInt8]
    ) -> String? {
        if actual.isEmpty { return "\(record) missing" }
        var offset = 0
        var lengths: [String: Int] = [:]
        for field in fixed {
            guard offset + field.width <= actual.count else { return "\(record): ends before its \(field.name)" }
            let value = actual[offset..<offset + field.width].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            offset += field.width
            if field.name.hasSuffix(" length") { lengths[field.name] = Int(value) }
            // Lengths follow from the name and extra fields, compared below.
            if value != field.value, !field.name.hasSuffix(" length") || field.name == "comment length" {
                return
                    "\(record): \(field.name) \(hex(value, field.width)) (canonical \(hex(field.value, field.width)))"
            }
        }
        guard let name, let extra else {
            return offset == actual.count ? nil : "\(record): \(actual.count - offset) bytes more than canonical"
        }
        let nameLength = lengths["name length"] ?? 0
        let extraLength = lengths["extra length"] ?? 0
        guard offset + nameLength + extraLength <= actual.count else {
            return "\(record): ends inside its name or extra"
        }
        if Array(actual[offset..<offset + nameLength]) != name { return "\(record): name differs from the canonical" }
        offset += nameLength
        var found: [(id: UInt16, data: [UInt8])] = []
        var at = offset
        while at + 4 <= offset + extraLength {
            let id = UInt16(actual[at]) | UInt16(actual[at + 1]) << 8
            let size = Int(actual[at + 2]) | Int(actual[at + 3]) << 8
            let end = min(at + 4 + size, offset + extraLength)
            found.append((id, Array(actual[at + 4..<end])))
            at = end
        }
        for (i, want) in extra.enumerated() {
            guard let got = found.first(where: { $0.id == want.id }) else {
                return "\(record): extra field \(hex(UInt32(want.id), 2)) missing"
            }
            if got.data != want.data {
                return
                    "\(record): extra field \(hex(UInt32(want.id), 2)) is \(bytes(got.data)) (canonical \(bytes(want.data)))"
            }
            if found.firstIndex(where: { $0.id == want.id }) != i {
                return "\(record): extra fields out of the canonical order"
            }
        }
        if let other = found.first(where: { f in !extra.contains { $0.id == f.id } }) {
            return "\(record): extra field \(hex(UInt32(other.id), 2)) is not canonical"
        }
        if at != offset + extraLength || found.count != extra.count {
            return "\(record): extra fields malformed"
        }
        if offset + extraLength != actual.count { return "\(record): bytes after the extra fields" }
        return nil
    }

    static func hex(_ value: UInt32, _ width: Int) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, width * 2 - digits.count)) + digits
    }

    static func bytes(_ data: [UInt8]) -> String {
        data.map { hex(UInt32($0), 1).dropFirst(2) }.joined()
    }
}
