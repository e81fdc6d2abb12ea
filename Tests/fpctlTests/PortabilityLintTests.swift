import Foundation
import Testing

/// Scripts/portability-lint.sh keeps Linux-only code in Platform.swift, so the
/// code builds on macOS (docs/install.md, "macOS").
@Suite("portability lint")
struct PortabilityLintTests {
    /// The script run over a tree of its own: `files` maps paths under Sources/ to their text.
    func lint(_ files: [String: String]) throws -> ProcessResult {
        let tmp = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: tmp.file("Scripts"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: Paths.packageRoot.appendingPathComponent("Scripts/portability-lint.sh").path,
            toPath: tmp.file("Scripts/portability-lint.sh"))
        for (path, text) in files {
            let url = URL(fileURLWithPath: tmp.file("Sources/\(path)"))
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        return try run(try tool("bash"), [tmp.file("Scripts/portability-lint.sh")])
    }

    @Test("a Glibc call, a glibc-only field or a /proc path outside Platform.swift fails, naming the line")
    func catches() throws {
        for line in ["_ = Glibc.close(fd)", "let h = act.__sigaction_handler", #"let s = "/proc/self/stat""#] {
            let r = try lint(["fpctl/Support/X.swift": "import Foundation\n\(line)\n"])
            #expect(r.status == 1, "\(line)")
            #expect(r.stderr.contains("Sources/fpctl/Support/X.swift:2:"), "\(r.stderr)")
        }
    }

    @Test("the same in Platform.swift, or in a comment, passes; and the tree as it is passes")
    func allows() throws {
        let r = try lint([
            "FlowPilotCore/Files/Platform.swift": "_ = Glibc.close(fd)\n",
            "FlowPilotCore/Other.swift": "/// reads /proc/self/stat on Linux (Platform)\n// Glibc.close\n",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let tree = try run(
            try tool("bash"), [Paths.packageRoot.appendingPathComponent("Scripts/portability-lint.sh").path])
        #expect(tree.status == 0, "\(tree.stderr)")
    }
}
