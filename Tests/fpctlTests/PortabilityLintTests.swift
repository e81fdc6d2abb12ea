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

    @Test("in Tests/, a Glibc call outside an #if canImport(Glibc) branch fails; inside one, or in a string, passes")
    func tests() throws {
        let tmp = try TemporaryDirectory()
        for dir in ["Scripts", "Sources", "Tests"] {
            try FileManager.default.createDirectory(atPath: tmp.file(dir), withIntermediateDirectories: true)
        }
        try FileManager.default.copyItem(
            atPath: Paths.packageRoot.appendingPathComponent("Scripts/portability-lint.sh").path,
            toPath: tmp.file("Scripts/portability-lint.sh"))
        let guarded = """
            import Foundation
            #if canImport(Glibc)
                private let mask = Glibc.umask
            #elseif canImport(Darwin)
                private let mask = Darwin.umask
            #endif
            let text = "Glibc.close(fd)"

            """
        try guarded.write(toFile: tmp.file("Tests/A.swift"), atomically: true, encoding: .utf8)
        let passes = try run(try tool("bash"), [tmp.file("Scripts/portability-lint.sh")])
        #expect(passes.status == 0, "\(passes.stderr)")
        try (guarded + "let m = Glibc.umask(0)\n").write(
            toFile: tmp.file("Tests/A.swift"), atomically: true, encoding: .utf8)
        let fails = try run(try tool("bash"), [tmp.file("Scripts/portability-lint.sh")])
        #expect(
            fails.status == 1 && fails.stderr.contains("Tests/A.swift:8: let m = Glibc.umask(0)"), "\(fails.stderr)")
        #expect(fails.stderr.split(separator: "\n").count == 2, "only that line: \(fails.stderr)")
    }

    @Test(
        "Scripts/sleep-lint.py: a test that sleeps outside a poll fails, naming the line; a poll, a said reason and the tree pass"
    )
    func sleeps() throws {
        let tmp = try TemporaryDirectory()
        let lint = Paths.packageRoot.appendingPathComponent("Scripts/sleep-lint.py").path
        func check(_ text: String) throws -> ProcessResult {
            try text.write(toFile: tmp.file("T.swift"), atomically: true, encoding: .utf8)
            return try run("/usr/bin/python3", [lint, tmp.path])
        }
        let bare = try check("func f() {\n    start()\n    usleep(300_000)\n}\n")
        #expect(bare.status == 1 && bare.stderr.contains("T.swift:3:"), "\(bare.stderr)")
        #expect(try check("func f() {\n    while !done() {\n        usleep(1_000)\n    }\n}\n").status == 0)
        #expect(
            try check("func f() {\n    // Time is what is tested: a slow body.\n    usleep(30_000)\n}\n").status == 0)
        let tree = try run("/usr/bin/python3", [lint, Paths.packageRoot.appendingPathComponent("Tests").path])
        #expect(tree.status == 0, "\(tree.stderr)")
    }

    @Test("Scripts/folder-cycles.py: two folders that name each other's types fail, naming both; the core passes")
    func folderCycles() throws {
        let tmp = try TemporaryDirectory()
        let script = Paths.packageRoot.appendingPathComponent("Scripts/folder-cycles.py").path
        for (path, text) in [
            ("A/One.swift", "public struct One { let two: Two? }\n"),
            ("B/Two.swift", "public struct Two { let three: Three? }\n"),
            ("B/Three.swift", "// One in a comment is no dependency\npublic enum Three { case a }\n"),
        ] {
            try FileManager.default.createDirectory(
                atPath: tmp.file((path as NSString).deletingLastPathComponent), withIntermediateDirectories: true)
            try text.write(toFile: tmp.file(path), atomically: true, encoding: .utf8)
        }
        #expect(try run("/usr/bin/python3", [script, tmp.path]).status == 0, "A -> B only: no cycle")
        try "struct Uses { let one: One }\n".write(toFile: tmp.file("B/Uses.swift"), atomically: true, encoding: .utf8)
        let cycle = try run("/usr/bin/python3", [script, tmp.path])
        #expect(cycle.status == 1 && cycle.stderr.contains("folders in a cycle: A, B"), "\(cycle.stderr)")
        #expect(cycle.stderr.contains("A -> B (") && cycle.stderr.contains("B -> A (One)"))
        let core = try run(
            "/usr/bin/python3", [script, Paths.packageRoot.appendingPathComponent("Sources/FlowPilotCore").path])
        #expect(core.status == 0, "\(core.stderr)")
    }
}
