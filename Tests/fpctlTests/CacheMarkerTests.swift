import Foundation
import Testing

/// The cache's marker damaged or mid-replacement, as real commands meet it
/// (#62): an empty `fpcache.json` beside the cache's folders is damage said
/// at once, `verify --repair` writes it again, and what a killed replacement
/// of it leaves is debris that `prune` removes.
@Suite("fpctl cache and a damaged marker")
struct CacheMarkerTests {
    /// A format-2 cache with `count` entries, as `cache put` writes them.
    func cache(_ tmp: TemporaryDirectory, count: Int = 5) throws -> String {
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let lines = (0..<count).map {
            #"{"placement":"paywall","user_id":"u-\#($0)","ttl_seconds":300,"flow_file":"\#(flow)"}"#
        }
        let input = tmp.file("in.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let dir = tmp.file("cache")
        let put = try fpctl(
            ["cache", "put", "--cache-dir", dir, "--input", input], environment: ["FPCTL_CACHE_FORMAT": "2"])
        #expect(put.status == 0, "\(put.stderr)")
        return dir
    }

    @Test("an empty marker: every command exits 65 at once naming it, verify reports it, --repair mends it")
    func emptyMarker() throws {
        let tmp = try TemporaryDirectory()
        let dir = try cache(tmp)
        try Data().write(to: URL(fileURLWithPath: "\(dir)/fpcache.json"))
        // A hang (the 60 s wait for a marker being published) is killed at 30 s and fails here.
        for command in [["cache", "list"], ["cache", "info"], ["cache", "prune"], ["resolve", "paywall"]] {
            var arguments = command + ["--cache-dir", dir]
            if command[0] == "resolve" {
                arguments += ["--api-url", "http://127.0.0.1:9", "--app-id", "app", "--user-id", "u-1"]
            }
            let result = try run(Paths.fpctl, arguments, timeout: 30)
            #expect(result.status == 65, "\(command): \(result.stderr)")
            let lines = result.stderr.split(separator: "\n")
            #expect(
                lines.count == 1 && lines[0].contains("fpcache.json") && lines[0].contains("damaged"),
                "\(command): \(result.stderr)")
        }
        let verify = try run(Paths.fpctl, ["cache", "verify", "--cache-dir", dir], timeout: 30)
        #expect(verify.status == 65)
        #expect(verify.stdout.contains("cache-corrupt-marker"), "\(verify.stdout)")
        let repair = try run(Paths.fpctl, ["cache", "verify", "--repair", "--cache-dir", dir], timeout: 30)
        #expect(repair.status == 65, "it found something: \(repair.stderr)")
        #expect(repair.stdout.contains("cache-corrupt-marker"))
        #expect(try fpctl("cache", "verify", "--cache-dir", dir).status == 0, "one run mended it")
        let list = try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv")
        #expect(list.stdout.split(separator: "\n").count == 6, "every entry is there: \(list.stdout)")
        let marker = try String(contentsOfFile: "\(dir)/fpcache.json", encoding: .utf8)
        #expect(marker.contains("\"version\": 2"), "format 2, as log/ says: \(marker)")
    }

    @Test("a killed replacement of the marker leaves debris that verify names and prune removes, not a foreign file")
    func markerTemporary() throws {
        let tmp = try TemporaryDirectory()
        let dir = try cache(tmp, count: 1)
        // The pid of a process that has exited: the writer is gone.
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.run()
        gone.waitUntilExit()
        let debris = "\(dir)/.fpcache.json.tmp-\(gone.processIdentifier)-12345"
        try Data(#"{"format":"fpcache","#.utf8).write(to: URL(fileURLWithPath: debris))
        let verify = try fpctl("cache", "verify", "--cache-dir", dir)
        #expect(verify.status == 65)
        #expect(
            verify.stdout.contains("cache-temp-debris") && !verify.stdout.contains("cache-foreign-file"),
            "\(verify.stdout)")
        #expect(try fpctl("cache", "prune", "--cache-dir", dir).status == 0)
        #expect(!FileManager.default.fileExists(atPath: debris))
        #expect(try fpctl("cache", "verify", "--cache-dir", dir).status == 0)
    }

    @Test(
        "names NFS and FUSE give a file unlinked while open (.nfs…, .fuse_hidden…) are the file system's: a new volume holding one is empty, verify and prune leave them"
    )
    func sillyRenamedFiles() throws {
        let tmp = try TemporaryDirectory()
        // What a process that lost the race to start a new volume on another node leaves for a moment.
        let fresh = tmp.file("fresh")
        try FileManager.default.createDirectory(atPath: fresh, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: "\(fresh)/.fuse_hidden0000001a00000001"))
        try writePutLine(tmp.file("one.jsonl"))
        let put = try fpctl(
            ["cache", "put", "--cache-dir", fresh, "--input", tmp.file("one.jsonl")],
            environment: ["FPCTL_CACHE_FORMAT": "2"])
        #expect(put.status == 0, "taken as a new volume: \(put.stderr)")
        let dir = try cache(tmp)
        let names = [
            "\(dir)/.nfs000000000012abcd00000001", "\(dir)/log/.nfs0000000000340000000a",
            "\(dir)/objects/.fuse_hidden0000002b00000002",
        ]
        for name in names { try Data("held open elsewhere".utf8).write(to: URL(fileURLWithPath: name)) }
        let verify = try fpctl("cache", "verify", "--cache-dir", dir)
        #expect(verify.status == 0, "not foreign: \(verify.stdout)")
        #expect(try fpctl("cache", "prune", "--user-id", "u-1", "--cache-dir", dir).status == 0)
        let repair = try fpctl("cache", "verify", "--repair", "--cache-dir", dir)
        #expect(repair.status == 0)
        for name in names { #expect(FileManager.default.fileExists(atPath: name), "\(name) left to its file system") }
    }
}
