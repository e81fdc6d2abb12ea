import Foundation
import Testing

@testable import FlowPilotCore

/// `media-corrupt`: the sample images and fonts are whole however their bytes
/// arrive, and every way of cutting one short, or of breaking a checksum, is found.
@Suite("media structure: whole files pass, cut or damaged ones are named")
struct MediaStructureTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Every asset of the sample bundles: PNGs and TrueType fonts.
    static let samples: [String] = ["demo", "travel"].flatMap { name in
        let dir = root.appendingPathComponent("bundles/\(name)/assets")
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted().map {
            dir.appendingPathComponent($0).path
        }
    }

    /// Minimal files of the other types, built here as their formats define them.
    static let crafted: [(String, [UInt8])] = [
        ("a.jpg", jpeg), ("a.gif", gif), ("a.webp", webp), ("a.woff", woff), ("a.mp4", mp4),
    ]

    static func check(_ path: String, _ bytes: [UInt8], chunk: Int) -> String? {
        var structure = MediaStructure(path: path)!
        var i = 0
        while i < bytes.count {
            structure.update(Array(bytes[i..<min(i + chunk, bytes.count)]))
            i += chunk
        }
        return structure.finish()
    }

    @Test("the sample assets and the crafted files are whole, in any chunking")
    func wholeFilesPass() throws {
        #expect(Self.samples.count >= 9)
        var files = try Self.samples.map { ($0, [UInt8](try Data(contentsOf: URL(fileURLWithPath: $0)))) }
        files += Self.crafted
        for (path, bytes) in files {
            for chunk in [1, 7, 4096, bytes.count] {
                #expect(Self.check(path, bytes, chunk: chunk) == nil, "\(path) in chunks of \(chunk)")
            }
            // The CRC-32 the zip check takes from here is the bytes' own, whole or cut.
            for cut in [bytes.count, bytes.count / 2, 3] {
                var structure = MediaStructure(path: path)!
                structure.update(Array(bytes[..<cut]))
                var crc = CRC32()
                Array(bytes[..<cut]).withUnsafeBytes { crc.update($0) }
                #expect(structure.fileCRC == crc.value, "\(path) cut to \(cut)")
            }
        }
    }

    @Test("every file cut short is named: at a third, one byte short, and at every byte of the small ones")
    func cutsAreFound() throws {
        var files = try Self.samples.map { ($0, [UInt8](try Data(contentsOf: URL(fileURLWithPath: $0)))) }
        files += Self.crafted
        for (path, bytes) in files {
            // A font's last table may be followed by up to 3 bytes of padding, which no directory covers.
            let last = bytes.count - (path.hasSuffix(".ttf") ? 4 : 1)
            let cuts = bytes.count <= 4096 ? Array(0..<bytes.count) : [0, 1, bytes.count / 3, last]
            // An MP4 cut where a box ends is a shorter MP4: no structure can tell.
            for cut in cuts where !(path.hasSuffix(".mp4") && [0, 16].contains(cut)) {
                let problem = Self.check(path, Array(bytes[..<cut]), chunk: 512)
                #expect(problem != nil, "\(path) cut to \(cut) of \(bytes.count) bytes passes")
            }
        }
        let png = try [UInt8](Data(contentsOf: URL(fileURLWithPath: Self.samples.first { $0.hasSuffix(".png") }!)))
        #expect(Self.check("x.png", Array(png[..<(png.count / 3)]), chunk: 4096)?.hasPrefix("cut short") == true)
    }

    @Test("a flipped bit in a PNG is a wrong CRC-32; bytes after IEND are refused; a font table past the end is found")
    func damageIsFound() throws {
        let pngPath = Self.samples.first { $0.hasSuffix(".png") }!
        var png = try [UInt8](Data(contentsOf: URL(fileURLWithPath: pngPath)))
        let original = png
        png[png.count / 2] ^= 0x10
        #expect(Self.check("x.png", png, chunk: 100)?.contains("wrong CRC-32") == true)
        #expect(Self.check("x.png", original + [0], chunk: 100) == "bytes after the end of the png")
        let fontPath = Self.samples.first { $0.hasSuffix(".ttf") }!
        let font = try [UInt8](Data(contentsOf: URL(fileURLWithPath: fontPath)))
        #expect(Self.check("x.ttf", Array(font.dropLast(100)), chunk: 999)?.contains("a table reaches byte") == true)
        #expect(Self.check("x.webp", Self.webp + [0, 0], chunk: 3) != nil)
        // Bytes after a JPEG's EOI are what decoders ignore, and so does the check.
        #expect(Self.check("x.jpg", Self.jpeg + [0, 0, 0], chunk: 3) == nil)
    }

    // MARK: Crafted files

    static let jpeg: [UInt8] = {
        func segment(_ marker: UInt8, _ body: [UInt8]) -> [UInt8] {
            [0xFF, marker, UInt8((body.count + 2) >> 8), UInt8((body.count + 2) & 0xFF)] + body
        }
        var b: [UInt8] = [0xFF, 0xD8]
        b += segment(0xE0, Array("JFIF".utf8) + [0, 1, 1, 0, 0, 1, 0, 1, 0, 0])
        b += segment(0xDB, [0] + [UInt8](repeating: 1, count: 64))
        b += segment(0xC0, [8, 0, 1, 0, 1, 1, 1, 0x11, 0])
        b += segment(0xDA, [1, 1, 0, 0, 63, 0])
        // Entropy-coded data with a stuffed 0xFF00 and a restart marker.
        b += [0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56]
        return b + [0xFF, 0xD9]
    }()

    static let gif: [UInt8] = {
        var b = Array("GIF89a".utf8) + [1, 0, 1, 0, 0x80, 0, 0] + [0, 0, 0, 255, 255, 255]
        b += [0x21, 0xF9, 4, 0, 0, 0, 0, 0]  // graphic control extension
        b += [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0]  // image descriptor
        b += [2, 2, 0x44, 0x01, 0]  // LZW minimum code size, one sub-block, terminator
        return b + [0x3B]
    }()

    static let webp: [UInt8] = {
        let payload: [UInt8] = [0x2F, 0, 0, 0, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xFE, 0x07, 0]
        let chunk = Array("VP8L".utf8) + le32(payload.count) + payload
        return Array("RIFF".utf8) + le32(4 + chunk.count) + Array("WEBP".utf8) + chunk
    }()

    static let woff: [UInt8] = {
        let table = [UInt8](repeating: 7, count: 12)
        let total = 44 + 20 + table.count
        var b = Array("wOFF".utf8) + [0, 1, 0, 0] + be32(total) + [0, 1, 0, 0] + be32(total + 100)
        b += [0, 1, 0, 0] + be32(0) + be32(0) + be32(0) + be32(0) + be32(0)
        b += Array("head".utf8) + be32(64) + be32(table.count) + be32(table.count) + be32(0)
        return b + table
    }()

    static let mp4: [UInt8] = {
        let ftyp = be32(16) + Array("ftypisom".utf8) + be32(0x200)
        let free = be32(12) + Array("free".utf8) + [1, 2, 3, 4]
        return ftyp + free
    }()

    static func be32(_ n: Int) -> [UInt8] {
        [UInt8(n >> 24 & 255), UInt8(n >> 16 & 255), UInt8(n >> 8 & 255), UInt8(n & 255)]
    }
    static func le32(_ n: Int) -> [UInt8] { be32(n).reversed() }
}
