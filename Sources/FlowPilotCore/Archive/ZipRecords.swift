/// The zip records a bundle is made of, field by field as PKWARE's APPNOTE.TXT
/// lays them out (all little-endian). Parsing names every field, so no code
/// reads a bare offset.
enum ZipSignature {
    static let localHeader: UInt32 = 0x0403_4B50
    static let centralRecord: UInt32 = 0x0201_4B50
    static let endRecord: UInt32 = 0x0605_4B50
    static let zip64Locator: UInt32 = 0x0706_4B50
    static let dataDescriptor: UInt32 = 0x0807_4B50
}

/// General purpose flag bits a bundle cares about.
enum ZipFlag {
    static let encrypted: UInt16 = 0x0001
    /// CRC and sizes follow the data in a data descriptor.
    static let dataDescriptor: UInt16 = 0x0008
    static let strongEncryption: UInt16 = 0x0040
}

/// Reads little-endian fields from a byte array, front to back.
struct LittleEndianCursor {
    let bytes: [UInt8]
    private(set) var position: Int

    init(_ bytes: [UInt8], at position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    mutating func u16() -> UInt16 {
        defer { position += 2 }
        return UInt16(bytes[position]) | UInt16(bytes[position + 1]) << 8
    }

    mutating func u32() -> UInt32 {
        defer { position += 4 }
        return UInt32(bytes[position]) | UInt32(bytes[position + 1]) << 8 | UInt32(bytes[position + 2]) << 16
            | UInt32(bytes[position + 3]) << 24
    }

    static func u32(_ bytes: [UInt8], at position: Int) -> UInt32 {
        var cursor = LittleEndianCursor(bytes, at: position)
        return cursor.u32()
    }
}

/// End of central directory record (APPNOTE 4.3.16): 22 bytes, then the comment.
struct EndRecord {
    static let size = 22
    let diskNumber: UInt16
    let centralDirectoryDisk: UInt16
    let entriesOnDisk: UInt16
    let entryCount: UInt16
    let centralDirectorySize: UInt32
    let centralDirectoryOffset: UInt32
    let commentLength: UInt16

    /// The record at `offset`, or nil when its signature is not there.
    init?(_ bytes: [UInt8], at offset: Int) {
        guard offset >= 0, offset + Self.size <= bytes.count else { return nil }
        var c = LittleEndianCursor(bytes, at: offset)
        guard c.u32() == ZipSignature.endRecord else { return nil }
        diskNumber = c.u16()
        centralDirectoryDisk = c.u16()
        entriesOnDisk = c.u16()
        entryCount = c.u16()
        centralDirectorySize = c.u32()
        centralDirectoryOffset = c.u32()
        commentLength = c.u16()
    }
}

/// Central directory file header (APPNOTE 4.3.12): 46 bytes, then name, extra
/// field and comment.
struct CentralRecord {
    static let fixedSize = 46
    let versionMadeBy: UInt16
    let versionNeeded: UInt16
    let flags: UInt16
    let method: UInt16
    let modificationTime: UInt16
    let modificationDate: UInt16
    let crc32: UInt32
    let compressedSize: UInt32
    let uncompressedSize: UInt32
    let nameLength: UInt16
    let extraLength: UInt16
    let commentLength: UInt16
    let diskNumberStart: UInt16
    let internalAttributes: UInt16
    let externalAttributes: UInt32
    let localHeaderOffset: UInt32

    /// Fixed part plus name, extra field and comment.
    var totalSize: Int { Self.fixedSize + Int(nameLength) + Int(extraLength) + Int(commentLength) }

    /// The record's fixed part at `offset`, or nil when it is cut short or its signature is not there.
    init?(_ bytes: [UInt8], at offset: Int) {
        guard offset + Self.fixedSize <= bytes.count else { return nil }
        var c = LittleEndianCursor(bytes, at: offset)
        guard c.u32() == ZipSignature.centralRecord else { return nil }
        versionMadeBy = c.u16()
        versionNeeded = c.u16()
        flags = c.u16()
        method = c.u16()
        modificationTime = c.u16()
        modificationDate = c.u16()
        crc32 = c.u32()
        compressedSize = c.u32()
        uncompressedSize = c.u32()
        nameLength = c.u16()
        extraLength = c.u16()
        commentLength = c.u16()
        diskNumberStart = c.u16()
        internalAttributes = c.u16()
        externalAttributes = c.u32()
        localHeaderOffset = c.u32()
    }
}

/// Local file header (APPNOTE 4.3.7): 30 bytes, then name and extra field.
struct LocalHeader {
    static let fixedSize = 30
    let versionNeeded: UInt16
    let flags: UInt16
    let method: UInt16
    let modificationTime: UInt16
    let modificationDate: UInt16
    let crc32: UInt32
    let compressedSize: UInt32
    let uncompressedSize: UInt32
    let nameLength: UInt16
    let extraLength: UInt16

    /// Fixed part plus name and extra field.
    var totalSize: Int { Self.fixedSize + Int(nameLength) + Int(extraLength) }

    init?(_ bytes: [UInt8]) {
        guard bytes.count >= Self.fixedSize else { return nil }
        var c = LittleEndianCursor(bytes)
        guard c.u32() == ZipSignature.localHeader else { return nil }
        versionNeeded = c.u16()
        flags = c.u16()
        method = c.u16()
        modificationTime = c.u16()
        modificationDate = c.u16()
        crc32 = c.u32()
        compressedSize = c.u32()
        uncompressedSize = c.u32()
        nameLength = c.u16()
        extraLength = c.u16()
    }
}

/// Data descriptor (APPNOTE 4.3.9): an optional signature, then CRC-32 and sizes.
struct DataDescriptor {
    let crc32: UInt32
    let compressedSize: UInt32
    let uncompressedSize: UInt32
    /// 16 with the optional signature, 12 without.
    let size: Int

    /// 16 when `bytes` start with the descriptor's signature, else 12.
    static func size(of bytes: [UInt8]) -> Int {
        bytes.count >= 4 && LittleEndianCursor.u32(bytes, at: 0) == ZipSignature.dataDescriptor ? 16 : 12
    }

    init?(_ bytes: [UInt8]) {
        size = Self.size(of: bytes)
        let signed = size == 16
        guard bytes.count >= size else { return nil }
        var c = LittleEndianCursor(bytes, at: signed ? 4 : 0)
        crc32 = c.u32()
        compressedSize = c.u32()
        uncompressedSize = c.u32()
    }
}
