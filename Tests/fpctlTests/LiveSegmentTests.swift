import Foundation
import Testing

/// A format-2 writer holds its segment's lock while it appends (#62): a
/// `prune` or `verify --repair` run meanwhile, on this node or through a
/// second mount of the volume whose locks reach the same files (NFS's
/// locks; Tests/volumes/quirkfs.py `--pass-flock`) and whose client caches
/// names and attributes, leaves that segment as it is, and loses nothing
/// the writer wrote.
@Suite("a live writer's segment")
struct LiveSegmentTests {
    /// A `cache put` reading lines from a FIFO: a writer that stays live, its segment open, until `finish`.
    final class FeedingWriter {
        let process = Process()
        let fifo: String
        private var fd: Int32 = -1
        private var written = 0

        init(cache: String, in tmp: TemporaryDirectory) throws {
            fifo = tmp.file("lines-\(UUID().uuidString)")
            #expect(mkfifo(fifo, 0o644) == 0)
            process.executableURL = URL(fileURLWithPath: Paths.fpctl)
            process.arguments = ["cache", "put", "--cache-dir", cache, "--input", fifo]
            process.environment = ProcessInfo.processInfo.environment.merging(["FPCTL_CACHE_FORMAT": "2"]) { $1 }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // The FIFO opens for writing once fpctl holds it for reading: a poll with a deadline.
            let deadline = Date() + 20
            while fd < 0 && process.isRunning && Date() < deadline {
                fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                if fd < 0 { usleep(20_000) }
            }
            try #require(fd >= 0, "fpctl never opened the FIFO")
            _ = fcntl(fd, F_SETFL, 0)
        }

        /// `count` more users' lines, `user-<n>` numbered on from the last
        /// (`resolvedAt`: an RFC 3339 time they were resolved at, not now).
        func feed(_ count: Int, resolvedAt: String? = nil) {
            let flow = Paths.sample("demo") + "/flows/paywall.json"
            let at = resolvedAt.map { #","resolved_at":"\#($0)""# } ?? ""
            var text = ""
            for n in written..<(written + count) {
                text +=
                    #"{"placement":"paywall","user_id":"user-\#(n)","ttl_seconds":300,"flow_file":"\#(flow)"\#(at)}"#
                    + "\n"
            }
            written += count
            _ = text.withCString { write(fd, $0, strlen($0)) }
        }

        /// Closes the FIFO; the writer seals its segment and exits.
        func finish() -> Int32 {
            close(fd)
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    /// The entries a `cache info` through `dir` counts.
    static func flows(_ dir: String) throws -> Int {
        let info = try fpctl("cache", "info", "--format", "json", "--cache-dir", dir)
        // Not a cache yet (a writer just started makes it): none listed, for `waitFor` to ask again.
        guard info.status == 0 else { return -1 }
        let doc = try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any]
        return doc?["flows"] as? Int ?? -1
    }

    /// Waits until `dir` lists `count` entries: what the writer reported is durable.
    static func waitFor(_ count: Int, in dir: String) throws {
        let deadline = Date() + 60
        while try flows(dir) < count {
            try #require(Date() < deadline, "the writer never got to \(count) entries")
            usleep(50_000)
        }
    }

    /// The cache's segments no index seals: the live writer's.
    static func unsealed(_ cache: String) throws -> [String] {
        let names = try FileManager.default.contentsOfDirectory(atPath: "\(cache)/log")
        return names.filter { $0.hasSuffix(".seg") && !names.contains($0 + ".idx") }
    }

    /// Writes 300 entries through `writerCache`, prunes and repairs through
    /// `otherCache` (the same cache, or another mount of it) while the writer
    /// is live, and checks through `writerCache` that nothing is lost.
    static func pruneBesideWriter(writerCache: String, otherCache: String, tmp: TemporaryDirectory) throws {
        // Older records to compact away: a first writer's, sealed.
        let seed = try fpctl(
            ["cache", "put", "--cache-dir", writerCache, "--input", try putInput(tmp, users: 0..<50)],
            environment: ["FPCTL_CACHE_FORMAT": "2"])
        #expect(seed.status == 0, "\(seed.stderr)")
        let writer = try FeedingWriter(cache: writerCache, in: tmp)
        writer.feed(150)
        try waitFor(150, in: writerCache)
        let live = try unsealed(writerCache)
        try #require(live.count == 1, "\(live)")
        // The other side reads the cache now (a client's cache of names and sizes is filled), then the writer goes on.
        #expect(try flows(otherCache) == 150)
        writer.feed(150)
        try waitFor(300, in: writerCache)
        let prune = try fpctl("cache", "prune", "--cache-dir", otherCache)
        #expect(prune.status == 0, "\(prune.stdout) \(prune.stderr)")
        #expect(!prune.stdout.contains(live[0]), "the live segment is not listed as removed: \(prune.stdout)")
        let verify = try fpctl("cache", "verify", "--repair", "--cache-dir", otherCache)
        #expect(verify.status == 0, "a live writer's segment is no finding: \(verify.stdout) \(verify.stderr)")
        #expect(try unsealed(writerCache) == live, "the live segment is where it was")
        writer.feed(100)
        #expect(writer.finish() == 0)
        #expect(try flows(writerCache) == 400, "every entry the writer wrote")
        let check = try fpctl("cache", "verify", "--cache-dir", writerCache)
        #expect(check.status == 0, "\(check.stdout)")
        let list = try fpctl("cache", "list", "--format", "csv", "--cache-dir", writerCache)
        for n in [0, 149, 150, 299, 399] { #expect(list.stdout.contains("paywall,user-\(n),")) }
    }

    static func putInput(_ tmp: TemporaryDirectory, users: Range<Int>) throws -> String {
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let path = tmp.file("seed-\(UUID().uuidString).jsonl")
        let lines = users.map {
            #"{"placement":"paywall","user_id":"user-\#($0)","ttl_seconds":300,"flow_file":"\#(flow)"}"#
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("prune and verify --repair from another process leave a live writer's segment in place and lose nothing")
    func sameNode() throws {
        let tmp = try TemporaryDirectory()
        try Self.pruneBesideWriter(writerCache: tmp.file("cache"), otherCache: tmp.file("cache"), tmp: tmp)
    }

    @Test(
        "two mounts of one volume, names and attributes cached 3 s, locks reaching the files: a prune on one beside a writer on the other loses nothing"
    )
    func twoNodes() throws {
        let tmp = try TemporaryDirectory()
        let backing = tmp.file("volume")
        let one = try QuirkMount(
            backing: backing, mountPoint: tmp.file("node1"), options: ["--pass-flock", "--cache-timeout", "3"])
        defer { one.unmount() }
        let two = try QuirkMount(
            backing: backing, mountPoint: tmp.file("node2"), options: ["--pass-flock", "--cache-timeout", "3"])
        defer { two.unmount() }
        try Self.pruneBesideWriter(
            writerCache: one.mountPoint + "/cache", otherCache: two.mountPoint + "/cache", tmp: tmp)
    }

    @Test(
        "in a live writer's segment, entries old enough for --older-than wait for the next prune (exit 0, counted); one identity's asked for by --user-id are not removed, exit 73"
    )
    func deferred() throws {
        let tmp = try TemporaryDirectory()
        let cache = tmp.file("cache")
        let writer = try FeedingWriter(cache: cache, in: tmp)
        writer.feed(20, resolvedAt: "2020-01-01T00:00:00Z")
        try Self.waitFor(20, in: cache)
        let prune = try fpctl("cache", "prune", "--older-than", "1d", "--cache-dir", cache)
        #expect(prune.status == 0, "\(prune.stderr)")
        #expect(prune.stderr.contains("20 entries old enough to go are in a segment a writer is still appending to"))
        #expect(try Self.flows(cache) == 20, "left for the next prune")
        let user = try fpctl("cache", "prune", "--user-id", "user-3", "--cache-dir", cache)
        #expect(user.status == 73 && user.stderr.contains("a writer is still appending to it"), "\(user.stderr)")
        #expect(writer.finish() == 0)
        #expect(try fpctl("cache", "prune", "--older-than", "1d", "--cache-dir", cache).status == 0)
        #expect(try Self.flows(cache) == 0, "the next prune, the writer gone, removes them")
    }
}
