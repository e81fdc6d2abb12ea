import Foundation
import Testing

/// A cache whose lock file cannot be opened: the commands that take the lock
/// say so in one line and exit 73, and change nothing.
@Suite("a cache lock that cannot be opened")
struct CacheLockTests {
    @Test("put, prune and clear: 'fpctl: error: …/.lock: …' and 73; the entries stay")
    func lockIsADirectory() throws {
        let tmp = try TemporaryDirectory()
        let cache = tmp.file("cache")
        let input = tmp.file("in.jsonl")
        try writePutLine(input)
        #expect(try fpctl("cache", "put", "--cache-dir", cache, "--input", input).status == 0)
        try? FileManager.default.removeItem(atPath: "\(cache)/.lock")
        try FileManager.default.createDirectory(atPath: "\(cache)/.lock", withIntermediateDirectories: false)
        for arguments in [
            ["cache", "put", "--cache-dir", cache, "--input", input],
            ["cache", "prune", "--cache-dir", cache, "--max-size", "1"],
            ["cache", "clear", "--cache-dir", cache, "--flows", "--force"],
        ] {
            let r = try fpctl(arguments)
            #expect(r.status == 73, "\(arguments[1]): \(r.status) \(r.stderr)")
            #expect(r.stderr.hasPrefix("fpctl: error: \(cache)/.lock: "), "\(arguments[1]): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "\(arguments[1]): \(r.stderr)")
        }
        let list = try fpctl("cache", "list", "--cache-dir", cache, "--format", "csv")
        #expect(list.stdout.contains("paywall,u-1,"))
    }
}
