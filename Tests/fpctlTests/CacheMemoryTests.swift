import Foundation
import Synchronization
import Testing

/// Every cache command reads a format-2 cache in flat memory (#62): the
/// peak RSS of each, run as a process on a cache of 100,000 entries (a
/// fifth of them written twice, so the log holds older records too), is
/// that of the same command on 1,000 entries plus a margin, measured in the
/// same run. Benchmarks/cache_scale.py measures 1 and 10 million.
@Suite("cache commands in flat memory")
struct CacheMemoryTests {
    /// What a command may add at 100 times the entries: a listing's sorted
    /// batch and its runs' buffers, a few segments' bytes, the survey's bits.
    static let margin = 16 << 10

    /// A format-2 cache of `entries` keys (two placements), the first fifth
    /// of them written again by a second writer.
    static func cache(_ tmp: TemporaryDirectory, _ name: String, entries: Int) throws -> String {
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let dir = tmp.file(name)
        for (round, count) in [(0, entries), (1, entries / 5)] {
            let lines = (0..<count).map { i in
                #"{"placement":"\#(i % 2 == 0 ? "paywall" : "onboarding")","user_id":"user-\#(i / 2)","ttl_seconds":\#(300 + round),"flow_file":"\#(flow)"}"#
            }
            let input = tmp.file("\(name)-\(round).jsonl")
            try (lines.joined(separator: "\n") + "\n").write(toFile: input, atomically: true, encoding: .utf8)
            let put = try fpctl(
                ["cache", "put", "--cache-dir", dir, "--input", input], environment: ["FPCTL_CACHE_FORMAT": "2"])
            #expect(put.status == 0, "\(put.stderr)")
        }
        return dir
    }

    /// The exit status and peak RSS (KiB) of one fpctl run: the only child
    /// of a python3 that reads its children's `ru_maxrss` once it is done.
    static func peak(_ arguments: [String]) throws -> (status: Int32, kib: Int) {
        let probe = """
            import resource, subprocess, sys
            run = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            """
        let result = try run(try tool("python3"), ["-c", probe, Paths.fpctl] + arguments, timeout: 300)
        let fields = result.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard fields.count == 2 else { throw ProbeFailed(output: result.stdout + result.stderr) }
        return (Int32(fields[0]), fields[1])
    }

    struct ProbeFailed: Error { let output: String }

    @Test("info, list, verify and prune at 100,000 entries peak within a margin of their peak at 1,000")
    func flat() throws {
        let tmp = try TemporaryDirectory()
        let small = try Self.cache(tmp, "small", entries: 1_000)
        let large = try Self.cache(tmp, "large", entries: 100_000)
        let commands: [[String]] = [
            ["cache", "info"],
            ["cache", "list", "--format", "csv"],
            // The aligned table: its widths need every row, which wait in a scratch file, not in memory.
            ["cache", "list"],
            // Its largest before glibc's sliding mmap threshold was held (Platform.returnLargeBuffersToSystem):
            // 17 MiB above the 1,000 entries' peak, where it is about 8 now.
            ["cache", "list", "--format", "json"],
            ["cache", "list", "--format", "json", "--placement", "paywall"],
            ["cache", "verify"],
            ["cache", "prune", "--older-than", "3650d", "--dry-run"],
            // Every entry chosen: the report of 100,000 removals waits in a scratch file, as text and as JSON.
            ["cache", "prune", "--older-than", "0s", "--dry-run"],
            ["cache", "prune", "--older-than", "0s", "--dry-run", "--format", "json"],
            // A compaction of the whole log: the older records go, one identity's entries with them.
            ["cache", "prune", "--user-id", "user-7"],
        ]
        // None of these changes the caches but the last, so they run two at a time (the test suite's longest
        // test, last to end: one at a time it left a core idle); the last, once they are done.
        let peaks = Mutex<[Int: Result<(reference: (Int32, Int), measured: (Int32, Int)), any Error>]>([:])
        let readOnly = commands.count - 1
        DispatchQueue.concurrentPerform(iterations: readOnly) { i in
            let result = Result {
                (
                    try Self.peak(commands[i] + ["--cache-dir", small]),
                    try Self.peak(commands[i] + ["--cache-dir", large])
                )
            }
            peaks.withLock { $0[i] = result.map { (reference: $0.0, measured: $0.1) } }
        }
        let last = Result {
            (
                try Self.peak(commands[readOnly] + ["--cache-dir", small]),
                try Self.peak(commands[readOnly] + ["--cache-dir", large])
            )
        }
        peaks.withLock { $0[readOnly] = last.map { (reference: $0.0, measured: $0.1) } }
        for (i, command) in commands.enumerated() {
            let name = command.joined(separator: " ")
            let (reference, measured) = try #require(try peaks.withLock { $0[i] }?.get(), "\(name)")
            #expect(reference.0 == 0 && measured.0 == 0, "\(name)")
            #expect(
                measured.1 <= reference.1 + Self.margin,
                "\(name): \(measured.1) KiB at 100,000 entries, \(reference.1) KiB at 1,000")
        }
        // What they read at that size is the whole cache, once a key.
        let info = try fpctl("cache", "info", "--format", "json", "--cache-dir", large)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        #expect(doc["flows"] as? Int == 99_998, "user-7's two entries pruned, no key counted twice")
        let list = try fpctl("cache", "list", "--format", "csv", "--cache-dir", large)
        let rows = list.stdout.split(separator: "\n").dropFirst()
        #expect(rows.count == 99_998)
        // Sorted by placement, then oldest first, across the listing's merged runs.
        let placements = rows.map { $0.prefix { $0 != "," } }
        #expect(placements.firstIndex(of: "paywall") == 49_999 && placements.last == "paywall")
        let gone = try fpctl("cache", "list", "--user-id", "user-7", "--format", "csv", "--cache-dir", large)
        #expect(gone.stdout.split(separator: "\n").count == 1, "the header alone: \(gone.stdout)")

        // A prune that removes everything: the compaction asks the rule of each record, and
        // the report of what went is written from its scratch file.
        let everything = ["cache", "prune", "--older-than", "0s", "--format", "csv"]
        let reference = try Self.peak(everything + ["--cache-dir", small])
        let plan = try fpctl(
            "cache", "prune", "--older-than", "0s", "--dry-run", "--format", "json", "--cache-dir", large)
        let measured = try Self.peak(everything + ["--cache-dir", large])
        #expect(reference.status == 0 && measured.status == 0)
        #expect(
            measured.kib <= reference.kib + Self.margin,
            "prune of every entry: \(measured.kib) KiB at 100,000 entries, \(reference.kib) KiB at 1,000")
        let planned = try #require(try JSONSerialization.jsonObject(with: Data(plan.stdout.utf8)) as? [String: Any])
        let flows = (planned["removed"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "flow" }
        #expect(flows.count == 99_998 && planned["dry_run"] as? Bool == true)
        let after = try fpctl("cache", "info", "--format", "json", "--cache-dir", large)
        let left = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any])
        #expect(left["flows"] as? Int == 0, "\(after.stdout)")
    }
}
