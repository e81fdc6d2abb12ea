import Foundation
import Testing

/// Every path a user names as input, given a directory or a FIFO instead of a
/// file: one `fpctl: error:` line naming the path, exit 66, no hang, and
/// nothing created (an unreadable file cannot be made here: the tests run as root).
@Suite("input paths that are directories or FIFOs: one line, exit 66, nothing written")
struct InputPathTests {
    let tmp: TemporaryDirectory
    let directory: String
    let fifo: String

    init() throws {
        tmp = try TemporaryDirectory()
        directory = tmp.file("a-directory")
        fifo = tmp.file("a-fifo")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        #expect(mkfifo(fifo, 0o644) == 0)
    }

    /// Each command with `PATH` where the bad path goes; a backend nobody listens on.
    static let commands: [[String]] = [
        [
            "warm", "paywall", "--identities", "PATH", "--api-url", "http://127.0.0.1:9", "--app-id", "demo",
            "--cache-dir", "CACHE",
        ],
        [
            "warm", "paywall", "--identities", "/dev/null", "--resume", "PATH", "--api-url", "http://127.0.0.1:9",
            "--app-id", "demo", "--cache-dir", "CACHE",
        ],
        ["report", "PATH"],
        ["cache", "put", "--cache-dir", "CACHE", "--input", "PATH"],
        ["bundle", "validate", "PATH"],
        ["bundle", "inspect", "PATH"],
        ["bundle", "preview", "PATH"],
    ]

    @Test("a directory", arguments: commands)
    func directoryGiven(_ command: [String]) throws {
        try check(command, path: directory)
    }

    /// --identities and put's --input read a pipe like a file (`--identities <(…)`), so
    /// a FIFO there waits for its writer as `cat` would; the inputs that are sought in must not.
    @Test(
        "a FIFO where a seekable file is needed, with nobody writing to it",
        arguments: commands.filter {
            !$0.contains("--input") && ($0.contains("--resume") || !$0.contains("--identities"))
        })
    func fifoGiven(_ command: [String]) throws {
        try check(command, path: fifo)
    }

    private func check(_ command: [String], path: String) throws {
        let cache = tmp.file("cache-\(UUID().uuidString)")
        let args = command.map { $0 == "PATH" ? path : $0 == "CACHE" ? cache : $0 }
        let r = try fpctl(args)
        #expect(r.status == 66, "\(args): \(r.status) \(r.stderr)")
        #expect(r.stderr.hasPrefix("fpctl: error: \(path): "), "\(args): \(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1, "\(args): \(r.stderr)")
        #expect(!r.stderr.contains("Error Domain"), "\(args): \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cache), "\(args) created the cache directory")
    }

    @Test("serve --host '' is a usage error before anything starts")
    func emptyHost() throws {
        let r = try fpctl("serve", Paths.sample("demo"), "--host", "", "--port", "0")
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "fpctl: error: --host: give an address to bind, e.g. 127.0.0.1 or 0.0.0.0\n")
    }
}
