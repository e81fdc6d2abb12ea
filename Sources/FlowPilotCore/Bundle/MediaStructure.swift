import CDeflate
import CZlib

/// Whether a media or font file is whole, checked as its bytes stream past
/// (rule `media-corrupt`, at `bundle build` and `bundle validate`): the bundled
/// default is the last thing an offline user sees, so an image cut short must
/// not ship because its first bytes look right.
///
/// - PNG: every chunk's length in bounds and its CRC-32 right, IHDR first,
///   through IEND, nothing after it.
/// - JPEG: marker segments with lengths in bounds from SOI, the entropy-coded
///   data after each SOS, through EOI (bytes after EOI are tolerated, as
///   decoders do).
/// - GIF: header, logical screen and colour tables, then image and extension
///   blocks with their sub-blocks, through the trailer.
/// - WebP: the RIFF size is the file's, every chunk within it.
/// - TrueType/OpenType: the table directory, every table within the file.
/// - WOFF and WOFF2: the header's length is the file's; WOFF's tables within it.
/// - MP4: top-level boxes that tile the file.
///
/// Feed `update` the bytes in order, in chunks of any size; `finish` says what
/// is wrong, or nil. Memory is a few bytes whatever the file's size.
public struct MediaStructure: Sendable {
    public let type: MediaType
    /// Bytes seen so far.
    private(set) var offset = 0
    /// Bytes gathered for the next header the parser reads.
    private var pending: [UInt8] = []
    private var need = 0
    /// Bytes to pass over.
    private var skip = 0
    private var state = State.start
    private var problem: String?
    /// The largest end of a table or a declared length, checked at `finish`.
    private var mustReach = 0
    private var exactLength: Int?
    private var lastByteWasFF = false

    private enum State: Sendable {
        case start
        case pngChunkHeader
        case pngCRC(type: String)
        case pngDone
        case jpegMarker
        case jpegLength(marker: UInt8)
        case jpegEntropy, jpegDone
        case gifScreen, gifBlock, gifImage, gifLZWSize, gifExtensionLabel, gifSubBlock, gifDone
        case webpChunk
        case fontDirectory(tables: Int)
        case woffDirectory(tables: Int)
        case boxHeader, boxLargeSize
        case noCheck
    }

    public init(type: MediaType) {
        self.type = type
        switch type {
        case .png: expect(8)
        case .jpeg: expect(2)
        case .gif: expect(6)
        case .webp: expect(12)
        case .ttf, .otf: expect(12)
        case .woff: expect(44)
        case .woff2: expect(48)
        case .mp4: (state, need) = (.boxHeader, 8)
        }
    }

    /// The structure checker for a path's extension, if it names a checked type.
    public init?(path: String) {
        guard let type = MediaType(extension: BundlePath.normalizedExtension(path)) else { return nil }
        self.init(type: type)
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var i = 0
        while i < bytes.count && problem == nil {
            let from = i
            if skip > 0 {
                let n = min(skip, bytes.count - i)
                skip -= n
                i += n
                take(bytes, from, i)
                if skip == 0 { dataEndCRC = fileCRC }
                continue
            }
            if case .jpegEntropy = state {
                // The scan counts `offset` itself.
                i += scanEntropy(UnsafeRawBufferPointer(rebasing: bytes[i...]))
                fileCRC = Self.crc(fileCRC, UnsafeRawBufferPointer(rebasing: bytes[from..<i]))
                continue
            }
            if isDone {
                // Only JPEG tolerates bytes after its end; the others were told at `finish`.
                if type != .jpeg { fail("bytes after the end of the \(type.rawValue)") }
                break
            }
            if case .noCheck = state { break }
            let n = min(need - pending.count, bytes.count - i)
            pending += UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)])
            i += n
            take(bytes, from, i)
            if pending.count == need {
                let header = pending
                pending = []
                parse(header)
            }
        }
        // The rest of the file after a problem, or after what the check reads: counted, and in the CRC.
        if i < bytes.count { take(bytes, i, bytes.count) }
    }

    /// Bytes `from..<to` of `bytes` were read: counted, and into the file's CRC.
    private mutating func take(_ bytes: UnsafeRawBufferPointer, _ from: Int, _ to: Int) {
        offset += to - from
        fileCRC = Self.crc(fileCRC, UnsafeRawBufferPointer(rebasing: bytes[from..<to]))
    }

    /// The CRC-32 of every byte fed so far (the zip CRC of the whole file once
    /// it is all fed): a reader takes it instead of passing over the bytes a
    /// second time. A PNG chunk's CRC is worked out from it (`crc32_combine`).
    public private(set) var fileCRC: UInt32 = 0
    /// `fileCRC` after a PNG chunk's header, and after its data.
    private var headerEndCRC: UInt32 = 0
    private var dataEndCRC: UInt32 = 0
    private var chunkTypeCRC: UInt32 = 0
    private var chunkLength = 0

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// What is wrong with the whole file, or nil when it is whole.
    public func finish() -> String? {
        if let problem { return problem }
        if let exactLength, exactLength != offset {
            return "the header says \(exactLength) bytes, the file has \(offset)"
        }
        if mustReach > offset { return "a table reaches byte \(mustReach), the file has \(offset)" }
        switch state {
        case .pngDone, .jpegDone, .gifDone, .noCheck:
            return nil
        case .webpChunk, .boxHeader:
            if skip == 0 && pending.isEmpty { return nil }
            return "cut short: \(type.rawValue) ends inside a chunk at byte \(offset)"
        default:
            return "cut short: the \(type.rawValue) ends at byte \(offset) before its end marker"
        }
    }

    private var isDone: Bool {
        switch state {
        case .pngDone, .jpegDone, .gifDone: true
        default: false
        }
    }

    private mutating func expect(_ count: Int) { need = count }

    private static func crc(_ value: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return value }
        return UInt32(libdeflate_crc32(value, base, bytes.count))
    }

    private mutating func fail(_ message: String) {
        if problem == nil { problem = message }
    }

    private static func be32(_ b: [UInt8], _ at: Int) -> Int {
        Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3])
    }
    private static func le32(_ b: [UInt8], _ at: Int) -> Int {
        Int(b[at]) | Int(b[at + 1]) << 8 | Int(b[at + 2]) << 16 | Int(b[at + 3]) << 24
    }
    private static func be16(_ b: [UInt8], _ at: Int) -> Int { Int(b[at]) << 8 | Int(b[at + 1]) }

    // MARK: Parsing the headers

    private mutating func parse(_ h: [UInt8]) {
        switch state {
        case .start: parseStart(h)
        case .pngChunkHeader: pngChunk(h)
        case .pngCRC(let type):
            // CRC(data) from the file's CRC before and after it; then CRC(type + data).
            let shifted = UInt32(crc32_combine(uLong(headerEndCRC), 0, off_t(chunkLength)))
            let data = dataEndCRC ^ shifted
            let crc = UInt32(crc32_combine(uLong(chunkTypeCRC), uLong(data), off_t(chunkLength)))
            if UInt32(Self.be32(h, 0)) != crc { return fail("chunk \(type) has a wrong CRC-32") }
            if type == "IEND" { state = .pngDone } else { (state, need) = (.pngChunkHeader, 8) }
        case .jpegMarker: jpegMarker(h[0])
        case .jpegLength(let marker):
            let length = Self.be16(h, 0)
            guard length >= 2 else { return fail("marker 0xFF\(hex(marker)) has length \(length)") }
            skip = length - 2
            if marker == 0xDA {
                (state, lastByteWasFF) = (.jpegEntropy, false)
            } else {
                (state, need) = (.jpegMarker, 1)
            }
        case .gifScreen, .gifBlock, .gifImage, .gifLZWSize, .gifExtensionLabel, .gifSubBlock: gif(h)
        case .webpChunk:
            let size = Self.le32(h, 4)
            skip = size + (size & 1)
            need = 8
        case .fontDirectory(let tables):
            mustReach = max(mustReach, Self.be32(h, 8) + Self.be32(h, 12))
            state = tables > 1 ? .fontDirectory(tables: tables - 1) : .noCheck
        case .woffDirectory(let tables):
            mustReach = max(mustReach, Self.be32(h, 4) + Self.be32(h, 8))
            state = tables > 1 ? .woffDirectory(tables: tables - 1) : .noCheck
        case .boxHeader:
            let size = Self.be32(h, 0)
            if size == 1 {
                (state, need) = (.boxLargeSize, 8)
            } else if size == 0 {
                state = .noCheck  // the last box runs to the end of the file
            } else if size < 8 {
                fail("a box has size \(size)")
            } else {
                skip = size - 8
            }
        case .boxLargeSize:
            guard h[0] == 0 else { return fail("a box claims more than 2^56 bytes") }
            let size = Self.be32(h, 0) << 32 | Self.be32(h, 4)
            guard size >= 16 else { return fail("a box has size \(size)") }
            (state, need, skip) = (.boxHeader, 8, size - 16)
        case .pngDone, .jpegDone, .gifDone, .jpegEntropy, .noCheck:
            break
        }
    }

    private mutating func parseStart(_ h: [UInt8]) {
        switch type {
        case .png:
            guard h == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] else { return fail("no PNG signature") }
            (state, need) = (.pngChunkHeader, 8)
        case .jpeg:
            guard h == [0xFF, 0xD8] else { return fail("no SOI marker") }
            (state, need) = (.jpegMarker, 1)
        case .gif:
            (state, need) = (.gifScreen, 7)
        case .webp:
            exactLength = Self.le32(h, 4) + 8
            (state, need) = (.webpChunk, 8)
        case .ttf, .otf:
            let tables = Self.be16(h, 4)
            guard (1...1024).contains(tables) else { return fail("the table directory has \(tables) tables") }
            (state, need) = (.fontDirectory(tables: tables), 16)
        case .woff:
            exactLength = Self.be32(h, 8)
            let tables = Self.be16(h, 12)
            guard (1...1024).contains(tables) else { return fail("the table directory has \(tables) tables") }
            (state, need) = (.woffDirectory(tables: tables), 20)
        case .woff2:
            exactLength = Self.be32(h, 8)
            guard Self.be16(h, 12) >= 1 else { return fail("the table directory has no tables") }
            state = .noCheck
        case .mp4:
            break
        }
    }

    private mutating func pngChunk(_ h: [UInt8]) {
        let length = Self.be32(h, 0)
        // Letters only, so a type is safe to print in a message.
        guard h[4..<8].allSatisfy({ (0x41...0x5A).contains($0 & 0xDF) }) else {
            return fail("a chunk at byte \(offset - 8) has no valid type")
        }
        let type = String(decoding: h[4..<8], as: UTF8.self)
        guard length <= Int(Int32.max) else { return fail("chunk \(type) claims \(length) bytes") }
        if offset == 16 && type != "IHDR" { return fail("the first chunk is \(type), not IHDR") }
        chunkTypeCRC = h[4..<8].withUnsafeBytes { Self.crc(0, $0) }
        (headerEndCRC, dataEndCRC, chunkLength) = (fileCRC, fileCRC, length)
        (skip, state, need) = (length, .pngCRC(type: type), 4)
    }

    private mutating func jpegMarker(_ byte: UInt8) {
        if !lastByteWasFF {
            guard byte == 0xFF else { return fail("expected a marker at byte \(offset - 1)") }
            lastByteWasFF = true
            return
        }
        switch byte {
        case 0xFF:
            return  // fill bytes
        case 0xD9:
            state = .jpegDone
        case 0xD0...0xD7, 0x01:
            break  // no length
        case 0x00, 0xD8:
            return fail("unexpected marker 0xFF\(hex(byte)) at byte \(offset - 2)")
        default:
            (state, need) = (.jpegLength(marker: byte), 2)
        }
        lastByteWasFF = false
    }

    /// Entropy-coded data after SOS: runs to the next marker that is not a
    /// stuffed 0xFF00 or a restart marker. Returns the bytes consumed.
    private mutating func scanEntropy(_ bytes: UnsafeRawBufferPointer) -> Int {
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            i += 1
            offset += 1
            if lastByteWasFF {
                if b == 0x00 || (0xD0...0xD7).contains(b) || b == 0xFF {
                    lastByteWasFF = b == 0xFF
                    continue
                }
                // A marker: hand its byte to the marker parser.
                (state, need) = (.jpegMarker, 1)
                jpegMarker(b)
                return i
            }
            if b == 0xFF { lastByteWasFF = true }
        }
        return i
    }

    private mutating func gif(_ h: [UInt8]) {
        switch state {
        case .gifScreen:
            let packed = h[4]
            skip = packed & 0x80 != 0 ? 3 << (Int(packed & 7) + 1) : 0
            (state, need) = (.gifBlock, 1)
        case .gifBlock:
            switch h[0] {
            case 0x2C: (state, need) = (.gifImage, 9)
            case 0x21: (state, need) = (.gifExtensionLabel, 1)
            case 0x3B: state = .gifDone
            default: fail("unknown block 0x\(hex(h[0])) at byte \(offset - 1)")
            }
        case .gifImage:
            let packed = h[8]
            skip = packed & 0x80 != 0 ? 3 << (Int(packed & 7) + 1) : 0
            (state, need) = (.gifLZWSize, 1)
        case .gifLZWSize, .gifExtensionLabel:
            (state, need) = (.gifSubBlock, 1)
        case .gifSubBlock:
            if h[0] == 0 {
                (state, need) = (.gifBlock, 1)
            } else {
                skip = Int(h[0])
            }
        default:
            break
        }
    }

    private func hex(_ b: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(b >> 4)], digits[Int(b & 15)]])
    }
}
