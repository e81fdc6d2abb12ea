import Foundation
import Testing

@Suite("man pages")
struct ManPageTests {
    static let committed = Paths.packageRoot.appendingPathComponent("man/man1").path

    /// The generate-manual tool that `swift package plugin generate-manual` builds
    /// (Scripts/test.sh and Scripts/update-man.sh run the plugin first).
    static var generator: String? {
        let root = Paths.packageRoot.appendingPathComponent(".build").path
        return [
            URL(fileURLWithPath: Paths.fpctl).deletingLastPathComponent().appendingPathComponent("generate-manual-tool")
                .path,
            "\(root)/debug/generate-manual-tool", "\(root)/release/generate-manual-tool",
        ]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test("the committed man pages match the commands (regenerate with Scripts/update-man.sh)")
    func notStale() throws {
        let generator = try #require(
            Self.generator, "generate-manual-tool is not built: run Scripts/test.sh or Scripts/update-man.sh")
        let tmp = try TemporaryDirectory()
        let date = try String(
            contentsOfFile: Paths.packageRoot.appendingPathComponent("man/DATE").path, encoding: .utf8
        )
        .trimmingCharacters(in: .whitespacesAndNewlines)
        let made = try run(generator, [Paths.fpctl, "--multi-page", "--date", date, "--output-directory", tmp.path])
        try #require(made.status == 0, "\(made.stderr)")
        let generated = try FileManager.default.contentsOfDirectory(atPath: tmp.path).sorted()
        let pages = try FileManager.default.contentsOfDirectory(atPath: Self.committed).sorted()
        #expect(generated == pages, "pages added or removed: run Scripts/update-man.sh")
        for page in generated {
            let fresh = try String(contentsOfFile: tmp.file(page), encoding: .utf8)
            let old = try? String(contentsOfFile: "\(Self.committed)/\(page)", encoding: .utf8)
            #expect(fresh == old, "man/man1/\(page) is stale: run Scripts/update-man.sh")
        }
    }

    @Test("every command has a page, and mandoc -Tlint finds no warning or error in any")
    func lintClean() throws {
        let pages = try FileManager.default.contentsOfDirectory(atPath: Self.committed).filter { $0.hasSuffix(".1") }
        for command in [
            "fpctl", "fpctl.bundle", "fpctl.bundle.build", "fpctl.bundle.validate", "fpctl.bundle.inspect",
            "fpctl.bundle.extract", "fpctl.serve",
            "fpctl.cache", "fpctl.cache.info", "fpctl.cache.list", "fpctl.cache.verify", "fpctl.cache.prune",
            "fpctl.cache.clear", "fpctl.cache.put",
            "fpctl.warm", "fpctl.report", "fpctl.resolve", "fpctl.ready",
            "fpctl.bundle.pull", "fpctl.bundle.diff", "fpctl.bundle.sign", "fpctl.bundle.keygen",
        ] {
            #expect(pages.contains("\(command).1"), "no page for \(command)")
        }
        let lint = try run(try tool("mandoc"), ["-Tlint", "-W", "warning"] + pages.map { "\(Self.committed)/\($0)" })
        // generate-manual puts a paragraph break between an option's abstract and
        // its list of values; mandoc drops it and says so. The only note allowed.
        let notes = (lint.stdout + lint.stderr).split(separator: "\n")
            .filter { !$0.hasSuffix("WARNING: skipping paragraph macro: Pp before Bl") }
        #expect(notes.isEmpty, "\(notes.joined(separator: "\n"))")
    }
}
