import Foundation
import Testing

/// `bundle preview` given what it cannot draw, or a place it may not write.
@Suite("bundle preview with bad input: the documented status, one line, no page left behind")
struct BundlePreviewInputTests {
    let tmp: TemporaryDirectory

    init() throws { tmp = try TemporaryDirectory() }

    /// The files in the temporary directory other than `keep`: no page, no temporary file.
    func leftovers(besides keep: Set<String>) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: tmp.path).filter { !keep.contains($0) }
    }

    @Test("a bundle whose zip structure cannot be read safely is refused with validate's findings and exit 65")
    func truncatedIsRefused() throws {
        let demo = try Data(contentsOf: URL(fileURLWithPath: try tmp.buildSample("demo")))
        try demo.prefix(demo.count / 2).write(to: URL(fileURLWithPath: tmp.file("cut.fpbundle")))
        let result = try fpctl("bundle", "preview", tmp.file("cut.fpbundle"), "-o", tmp.file("cut.html"))
        #expect(result.status == 65)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("fpctl: error: zip-"), "\(result.stderr)")
        #expect(result.stderr.contains("cut.fpbundle"))
        #expect(try leftovers(besides: ["demo.fpbundle", "cut.fpbundle"]).isEmpty)
    }

    @Test("an invalid bundle that reads safely is drawn, its findings on the page and a warning naming it")
    func invalidButReadableIsDrawn() throws {
        var bundle = try Data(contentsOf: URL(fileURLWithPath: try tmp.buildSample("demo")))
        let at = try #require(bundle.range(of: Data([0x89, 0x50, 0x4E, 0x47]))?.lowerBound)
        bundle[at + 40] ^= 0xFF
        try bundle.write(to: URL(fileURLWithPath: tmp.file("tampered.fpbundle")))
        let result = try fpctl("bundle", "preview", tmp.file("tampered.fpbundle"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stderr
                == "fpctl: warning: \(tmp.file("tampered.fpbundle")): invalid bundle, drawn with its findings at the top\n"
        )
        #expect(result.stdout.contains(#"<li class="error">zip-corrupt: media/"#))
        #expect(result.stdout.contains("1 errors, 0 warnings"))
        #expect(result.stdout.contains("<h2>paywall</h2>"))
    }

    @Test("an output that exists needs --overwrite (73 and the file untouched without it)")
    func existingOutput() throws {
        let demo = try tmp.buildSample("demo")
        let page = tmp.file("page.html")
        try Data("keep".utf8).write(to: URL(fileURLWithPath: page))
        let refused = try fpctl("bundle", "preview", demo, "-o", page)
        #expect(refused.status == 73)
        #expect(refused.stderr == "fpctl: error: \(page): already exists (use --overwrite to replace it)\n")
        #expect(try String(contentsOfFile: page, encoding: .utf8) == "keep")
        let replaced = try fpctl("bundle", "preview", demo, "-o", page, "--overwrite")
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(try String(contentsOfFile: page, encoding: .utf8).hasPrefix("<!DOCTYPE html>"))
        #expect(try leftovers(besides: ["demo.fpbundle", "page.html"]).isEmpty)
    }

    @Test("a missing bundle exits 66 naming it; three bundles are a usage error")
    func missingAndTooMany() throws {
        let missing = try fpctl("bundle", "preview", tmp.file("nope.fpbundle"), "-o", tmp.file("p.html"))
        #expect(missing.status == 66)
        #expect(missing.stderr == "fpctl: error: \(tmp.file("nope.fpbundle")): no such file\n")
        #expect(try leftovers(besides: []).isEmpty)
        let three = try fpctl("bundle", "preview", "a", "b", "c")
        #expect(three.status == 64)
        #expect(three.stderr.contains("give one bundle, or two (OLD NEW) to compare; got 3"))
    }
}
