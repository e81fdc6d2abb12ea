import FlowPilotCore
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

    /// The SHA-256 of every sample bundle and of the generated 300-flow source
    /// (Fixtures/make-large-source.py), as fpctl 0.1.0 first wrote them with
    /// libarchive on Debian 12. The writer owns every header byte, so only the
    /// deflate library (zlib, level 6) could move them: a zlib whose output
    /// differs fails here instead of shipping. `manifest.json` names the
    /// generator (`fpctl VERSION`), so a version bump changes these on purpose.
    @Test("each sample bundle and a generated 300-flow source build to their pinned SHA-256", arguments: try pinned())
    func pinnedBytes(name: String, sha256: String) throws {
        let tmp = try TemporaryDirectory()
        let source: String
        if name == "large" {
            source = tmp.file("large")
            let made = try run(
                which("python3") ?? "/usr/bin/python3",
                [
                    Paths.packageRoot.appendingPathComponent("Tests/fpctlTests/Fixtures/make-large-source.py").path,
                    source,
                ])
            #expect(made.status == 0, "\(made.stderr)")
        } else {
            source = Paths.sample(name)
        }
        let bundle = tmp.file("\(name).fpbundle")
        let build = try fpctl("bundle", "build", source, "-o", bundle, environment: ["SOURCE_DATE_EPOCH": ""])
        #expect(build.status == 0, "\(build.stderr)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: bundle))
        #expect(Digest.sha256Hex(bytes) == sha256, "\(name): \(bytes.count) bytes")
    }

    static func pinned() throws -> [(String, String)] {
        let file = Paths.packageRoot.appendingPathComponent("Tests/fpctlTests/Fixtures/pinned-bundles.sha256")
        return try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return (String(fields[1].dropLast(".fpbundle".count)), String(fields[0]))
        }
    }
}
