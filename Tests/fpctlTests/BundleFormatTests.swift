import Foundation
import Testing

/// docs/bundle-format.md is complete enough to write an encoder from: one written
/// from it in Python (zlib and struct, no fpctl code) re-encodes fpctl's bundles
/// byte for byte.
@Suite("the bundle format in writing")
struct BundleFormatTests {
    @Test(
        "an independent encoder written from docs/bundle-format.md gives fpctl's bytes",
        arguments: ["demo", "travel", "demo signed"])
    func independentEncoder(sample: String) throws {
        let tmp = try TemporaryDirectory()
        let name = String(sample.split(separator: " ")[0])
        let bundle = try tmp.buildSample(name)
        if sample.hasSuffix("signed") {
            #expect(try fpctl("bundle", "keygen", "-o", tmp.file("release")).status == 0)
            #expect(try fpctl("bundle", "sign", bundle, "--key", tmp.file("release.key")).status == 0)
        }
        let extracted = try fpctl("bundle", "extract", bundle, "-o", tmp.file("files"))
        #expect(extracted.status == 0, "\(extracted.stderr)")
        #expect(FileManager.default.fileExists(atPath: tmp.file("files/manifest.sig")) == sample.hasSuffix("signed"))
        let encoder = Paths.packageRoot.appendingPathComponent("Tests/fpctlTests/Fixtures/fpbundle_encoder.py").path
        let encoded = try run(
            which("python3") ?? "/usr/bin/python3", [encoder, tmp.file("files"), tmp.file("python.fpbundle")])
        #expect(encoded.status == 0, "\(encoded.stderr)")
        let mine = try Data(contentsOf: URL(fileURLWithPath: tmp.file("python.fpbundle")))
        let fpctls = try Data(contentsOf: URL(fileURLWithPath: bundle))
        #expect(mine == fpctls, "\(sample): \(mine.count) bytes from the encoder, \(fpctls.count) from fpctl")
        let validated = try fpctl("bundle", "validate", tmp.file("python.fpbundle"))
        #expect(validated.status == 0, "\(validated.stdout)")
    }
}
