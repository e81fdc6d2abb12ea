import Foundation
import Testing

/// Output paths as people type them, relative to the working directory: each
/// shape is written whole where it names, and nothing else is left behind.
@Suite("output paths of every shape")
struct PathShapeTests {
    /// One and two characters (a one-character name trapped in Foundation's
    /// NSString path code after the file was published), a non-ASCII one, and
    /// names with a directory part.
    static let shapes = ["x", "é", "xy", "./x", "sub/x", "sub/é"]

    /// A fresh working directory with `sub/` in it.
    func workingDirectory() throws -> TemporaryDirectory {
        let tmp = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: tmp.file("sub"), withIntermediateDirectories: false)
        return tmp
    }

    /// Every name in the directory tree, for "nothing else was left behind".
    func names(_ tmp: TemporaryDirectory) throws -> [String] {
        try FileManager.default.subpathsOfDirectory(atPath: tmp.path).sorted()
    }

    @Test("bundle build -o NAME writes a valid bundle there", arguments: shapes)
    func build(name: String) throws {
        let tmp = try workingDirectory()
        let r = try fpctl("bundle", "build", Paths.sample("demo"), "-o", name, currentDirectory: tmp.path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("Fatal error") && !r.stderr.contains("Backtrace"))
        #expect(try fpctl("bundle", "validate", tmp.file(name)).status == 0)
        // The bundle, and no temporary file beside it.
        #expect(Set(try names(tmp)) == ["sub", name.replacingOccurrences(of: "./", with: "")])
    }

    @Test("bundle preview -o NAME writes the page there", arguments: shapes)
    func preview(name: String) throws {
        let bundles = try TemporaryDirectory()
        let bundle = try bundles.buildSample("demo")
        let tmp = try workingDirectory()
        let r = try fpctl("bundle", "preview", bundle, "-o", name, currentDirectory: tmp.path)
        #expect(r.status == 0, "\(r.stderr)")
        let page = try String(contentsOfFile: tmp.file(name), encoding: .utf8)
        #expect(page.hasPrefix("<!DOCTYPE html>"))
        #expect(try names(tmp).filter { $0.contains(".tmp-") }.isEmpty)
    }

    @Test("cache put --cache-dir NAME makes the cache there, and verify finds it clean", arguments: shapes)
    func cacheDirectory(name: String) throws {
        let tmp = try workingDirectory()
        let input = tmp.file("in.jsonl")
        try writePutLine(input)
        let r = try fpctl("cache", "put", "--cache-dir", name, "--input", input, currentDirectory: tmp.path)
        #expect(r.status == 0, "\(r.stderr)")
        let verify = try fpctl("cache", "verify", "--cache-dir", name, currentDirectory: tmp.path)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        let list = try fpctl("cache", "list", "--cache-dir", name, "--format", "csv", currentDirectory: tmp.path)
        #expect(list.stdout.contains("paywall,u-1,"))
    }
}
