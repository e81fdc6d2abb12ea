import Foundation
import Testing

/// `bundle extract` writes the bundle's files and nothing else: `--force`
/// replaces same-named files only, anything else in the way stops it before a
/// file moves, and a directory is never taken for empty because it could not be read.
@Suite("bundle extract: only the bundle's files, all or nothing")
struct ExtractSafetyTests {
    /// Every path under `dir` with its kind and, for files, contents.
    func snapshot(_ dir: String) throws -> [String: String] {
        var out: [String: String] = [:]
        for path in try FileManager.default.subpathsOfDirectory(atPath: dir) {
            let full = "\(dir)/\(path)"
            var info = stat()
            lstat(full, &info)
            switch info.st_mode & S_IFMT {
            case S_IFDIR: out[path] = "dir"
            case S_IFLNK:
                out[path] = "link:" + ((try? FileManager.default.destinationOfSymbolicLink(atPath: full)) ?? "")
            default: out[path] = String(decoding: FileManager.default.contents(atPath: full) ?? Data(), as: UTF8.self)
            }
        }
        return out
    }

    @Test("--force keeps the user's other files, in the bundle's directories too")
    func forceKeepsOthers() throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let out = tmp.file("out")
        try FileManager.default.createDirectory(atPath: "\(out)/media", withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: "\(out)/media/mine.txt"))
        try Data("notes".utf8).write(to: URL(fileURLWithPath: "\(out)/notes.txt"))
        try Data("stale".utf8).write(to: URL(fileURLWithPath: "\(out)/manifest.json"))
        let r = try fpctl("bundle", "extract", bundle, "-o", out, "--force")
        #expect(r.status == 0, "\(r.stderr)")
        let after = try snapshot(out)
        #expect(after["media/mine.txt"] == "mine" && after["notes.txt"] == "notes")
        #expect(after["manifest.json"] != "stale" && after["manifest.json"]?.hasPrefix("{") == true)
        #expect(!after.keys.contains { $0.hasPrefix(".fpctl-extract") })
    }

    @Test(
        "anything but a file where the bundle writes stops --force before a file moves",
        arguments: ["manifest.json is a directory", "media is a dangling link", "media is a file", "flows links out"])
    func inTheWay(setup: String) throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let out = tmp.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try Data("notes".utf8).write(to: URL(fileURLWithPath: "\(out)/notes.txt"))
        switch setup {
        case "manifest.json is a directory":
            try FileManager.default.createDirectory(atPath: "\(out)/manifest.json", withIntermediateDirectories: true)
            try Data("inside".utf8).write(to: URL(fileURLWithPath: "\(out)/manifest.json/inside.txt"))
        case "media is a dangling link":
            try FileManager.default.createSymbolicLink(atPath: "\(out)/media", withDestinationPath: "nowhere")
        case "media is a file":
            try Data("a file".utf8).write(to: URL(fileURLWithPath: "\(out)/media"))
        default:
            try FileManager.default.createDirectory(atPath: tmp.file("elsewhere"), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(
                atPath: "\(out)/flows", withDestinationPath: tmp.file("elsewhere"))
        }
        let before = try snapshot(out)
        let r = try fpctl("bundle", "extract", bundle, "-o", out, "--force")
        #expect(r.status == 73, "\(setup): \(r.stderr)")
        #expect(r.stderr.contains("is in the way") && r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        #expect(try snapshot(out) == before, "\(setup)")
        if setup == "flows links out" {
            #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.file("elsewhere")).isEmpty)
        }
    }

    @Test("without --force a directory with anything in it is refused, and left as it was")
    func notEmpty() throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let out = tmp.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: "\(out)/.hidden"))
        let r = try fpctl("bundle", "extract", bundle, "-o", out)
        #expect(r.status == 73 && r.stderr.contains("not empty"), "\(r.stderr)")
        #expect(try snapshot(out) == [".hidden": "x"])
    }

    @Test("in a working directory deeper than PATH_MAX, a relative target extracts")
    func deepWorkingDirectory() throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let name = String(repeating: "d", count: 250)
        // 20 levels of 251 bytes: a working directory of over 5,000 bytes.
        let script = """
            set -e
            cd '\(tmp.path)'
            for i in $(seq 20); do mkdir \(name); cd \(name); done
            '\(Paths.fpctl)' bundle extract '\(bundle)' -o out
            test -f out/manifest.json && test -d out/flows
            echo ${#PWD}
            """
        // bash: dash's cd stops short of PATH_MAX.
        let r = try run(try tool("bash"), ["-c", script])
        #expect(r.status == 0, "\(r.stderr)")
        #expect((r.stdout.split(separator: "\n").last.flatMap { Int($0) } ?? 0) > Int(PATH_MAX), "\(r.stdout)")
        _ = try run(try tool("rm"), ["-rf", tmp.file(name)])
    }
}
