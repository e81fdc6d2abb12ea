import Foundation

/// An image's width and height in pixels, as its header states them (PNG's
/// IHDR, GIF's logical screen, JPEG's first start-of-frame, WebP's VP8, VP8L or
/// VP8X chunk). Nil for anything else or a header that says zero.
public struct ImageSize: Sendable, Equatable {
    public let width: Int
    public let height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public init?(_ data: Data) {
        let bytes = [UInt8](data.prefix(64 * 1024))
        guard let (w, h) = Self.png(bytes) ?? Self.gif(bytes) ?? Self.webp(bytes) ?? Self.jpeg(bytes),
            w > 0, h > 0
        else { return nil }
        width = w
        height = h
    }

    private static func be(_ b: [UInt8], _ at: Int, _ count: Int) -> Int? {
        guard at >= 0, at + count <= b.count else { return nil }
        return b[at..<(at + count)].reduce(0) { $0 << 8 | Int($1) }
    }

    private static func le(_ b: [UInt8], _ at: Int, _ count: Int) -> Int? {
        guard at >= 0, at + count <= b.count else { return nil }
        return b[at..<(at + count)].reversed().reduce(0) { $0 << 8 | Int($1) }
    }

    private static func png(_ b: [UInt8]) -> (Int, Int)? {
        guard b.starts(with: [0x89, 0x50, 0x4E, 0x47]), b.count >= 24, b[12..<16].elementsEqual("IHDR".utf8),
            let w = be(b, 16, 4), let h = be(b, 20, 4)
        else { return nil }
        return (w, h)
    }

    private static func gif(_ b: [UInt8]) -> (Int, Int)? {
        guard b.starts(with: Array("GIF8".utf8)), let w = le(b, 6, 2), let h = le(b, 8, 2) else { return nil }
        return (w, h)
    }

    private static func webp(_ b: [UInt8]) -> (Int, Int)? {
        guard b.starts(with: Array("RIFF".utf8)), b.count >= 30, b[8..<12].elementsEqual("WEBP".utf8) else {
            return nil
        }
        switch String(decoding: b[12..<16], as: UTF8.self) {
        case "VP8X":
            guard let w = le(b, 24, 3), let h = le(b, 27, 3) else { return nil }
            return (w + 1, h + 1)
        case "VP8L":
            guard b[20] == 0x2F, let bits = le(b, 21, 4) else { return nil }
            return ((bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1)
        case "VP8 ":
            guard let w = le(b, 26, 2), let h = le(b, 28, 2) else { return nil }
            return (w & 0x3FFF, h & 0x3FFF)
        default: return nil
        }
    }

    /// Walks the markers to the first SOF0..SOF15 (not DHT, JPG or DAC).
    private static func jpeg(_ b: [UInt8]) -> (Int, Int)? {
        guard b.starts(with: [0xFF, 0xD8]) else { return nil }
        var i = 2
        while i + 4 <= b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xFF {
                i += 1
                continue
            }
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) {
                i += 2
                continue
            }
            guard let length = be(b, i + 2, 2), length >= 2 else { return nil }
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                guard let h = be(b, i + 5, 2), let w = be(b, i + 7, 2) else { return nil }
                return (w, h)
            }
            i += 2 + length
        }
        return nil
    }
}
