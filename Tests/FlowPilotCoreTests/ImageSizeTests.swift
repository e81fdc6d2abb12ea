import Foundation
import Testing

@testable import FlowPilotCore

/// The preview draws an image at its size, so that size must come from the
/// header whatever the format, and nothing at all from bytes that are no image.
@Suite("image sizes from headers")
struct ImageSizeTests {
    static func sample(_ name: String) throws -> Data {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return try Data(contentsOf: url.appendingPathComponent("bundles/\(name)"))
    }

    @Test("the sample PNGs have the sizes their IHDR says (file(1) agrees)")
    func png() throws {
        #expect(ImageSize(try Self.sample("demo/assets/badge.png")) == ImageSize(width: 24, height: 24))
        #expect(ImageSize(try Self.sample("demo/assets/paywall-hero.png")) == ImageSize(width: 96, height: 64))
    }

    @Test("GIF, JPEG (past an APP0 segment) and the three WebP chunk kinds")
    func otherFormats() {
        let gif = Data("GIF89a".utf8) + Data([0x40, 0x01, 0xF0, 0x00]) + Data(count: 8)
        #expect(ImageSize(gif) == ImageSize(width: 320, height: 240))
        let app0: [UInt8] = [0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00]
        let sof0: [UInt8] = [0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x03]
        #expect(
            ImageSize(Data([0xFF, 0xD8] + app0 + sof0 + [UInt8](repeating: 0, count: 12)))
                == ImageSize(width: 640, height: 480))
        func webp(_ chunk: String, _ body: [UInt8]) -> Data {
            Data("RIFF".utf8) + Data([0, 0, 0, 0]) + Data("WEBPVP8".utf8) + Data(chunk.utf8) + Data([0, 0, 0, 0])
                + Data(body) + Data(count: 16)
        }
        #expect(
            ImageSize(webp("X", [0, 0, 0, 0, 0x3F, 0x01, 0x00, 0xEF, 0x00, 0x00])) == ImageSize(width: 320, height: 240)
        )
        // VP8L: 0x2F, then 14 bits width-1 (99) and 14 bits height-1 (49).
        let bits = 99 | 49 << 14
        #expect(
            ImageSize(webp("L", [0x2F, UInt8(bits & 0xFF), UInt8(bits >> 8 & 0xFF), UInt8(bits >> 16 & 0xFF), 0]))
                == ImageSize(width: 100, height: 50))
        #expect(
            ImageSize(webp(" ", [0, 0, 0, 0x9D, 0x01, 0x2A, 0x40, 0x01, 0xF0, 0x00]))
                == ImageSize(width: 320, height: 240))
    }

    @Test("no size for a font, a cut header, or an image that says zero")
    func noSize() throws {
        #expect(ImageSize(try Self.sample("demo/assets/DejaVuSans-Bold.ttf")) == nil)
        #expect(ImageSize(try Self.sample("demo/assets/badge.png").prefix(20)) == nil)
        #expect(ImageSize(Data("GIF89a".utf8) + Data([0, 0, 5, 0])) == nil)
        #expect(ImageSize(Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01])) == nil)
    }
}
