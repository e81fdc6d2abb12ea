import Foundation
import Testing

/// A compaction that meets a full disk (#62, point 7) leaves nothing of its
/// own behind: the new segments it had made are removed, the old ones still
/// hold every record, `verify` finds the cache clean, and the message names
/// the full disk, not a record.
@Suite("a compaction on a full disk")
struct CompactionFullDiskTests {
    @Test("prune on a full tmpfs exits 73 naming the disk, and log/ is as it was; with room, the same prune succeeds")
    func fullDisk() throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("small")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(try run("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dir]).status == 0)
        defer { _ = try? run("/bin/umount", [dir]) }
        let cache = dir + "/c"
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        // Two writers: the second's records supersede half the first's, so a prune compacts.
        for (round, users) in [(0, 0..<3000), (1, 0..<1500)] {
            let input = tmp.file("in-\(round).jsonl")
            let lines = users.map {
                #"{"placement":"paywall","user_id":"user-\#($0)","ttl_seconds":300,"flow_file":"\#(flow)"}"#
            }
            try (lines.joined(separator: "\n") + "\n").write(toFile: input, atomically: true, encoding: .utf8)
            let put = try fpctl(
                ["cache", "put", "--cache-dir", cache, "--input", input], environment: ["FPCTL_CACHE_FORMAT": "2"])
            #expect(put.status == 0, "\(put.stderr)")
        }
        // The disk filled but for a few blocks: less than the compaction's new segments need.
        let filler = dir + "/filler"
        var info = statvfs()
        #expect(statvfs(dir, &info) == 0)
        let free = Int(info.f_bavail) * Int(info.f_frsize)
        try Data(count: max(0, free - 64 << 10)).write(to: URL(fileURLWithPath: filler))
        let before = try FileManager.default.contentsOfDirectory(atPath: cache + "/log").sorted()
        let prune = try fpctl("cache", "prune", "--user-id", "user-7", "--cache-dir", cache)
        #expect(prune.status == 73, "\(prune.stdout) \(prune.stderr)")
        #expect(prune.stderr.contains("the compaction could not write its new segments, so nothing was removed"))
        #expect(prune.stderr.contains("No space left on device"), "\(prune.stderr)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: cache + "/log").sorted() == before,
            "nothing left behind")
        #expect(try fpctl("cache", "verify", "--cache-dir", cache).status == 0)
        let listed = try fpctl("cache", "list", "--format", "csv", "--cache-dir", cache)
        #expect(listed.stdout.split(separator: "\n").count == 3001, "every entry still there")
        try FileManager.default.removeItem(atPath: filler)
        let again = try fpctl("cache", "prune", "--user-id", "user-7", "--cache-dir", cache)
        #expect(again.status == 0, "\(again.stderr)")
        let after = try fpctl("cache", "list", "--format", "csv", "--cache-dir", cache)
        #expect(after.stdout.split(separator: "\n").count == 3000 && !after.stdout.contains("paywall,user-7,"))
    }
}
