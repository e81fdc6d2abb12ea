import Foundation
import Testing

/// JSON Lines for `fpctl cache put`: `count` flow entries for distinct users.
private func putLines(_ prefix: String, count: Int, placement: String = "paywall") -> String {
    let flow = Paths.sample("demo") + "/flows/paywall.json"
    return (0..<count).map { i in
        #"{"placement":"\#(placement)","user_id":"\#(prefix)-\#(i)","attributes":{"n":\#(i)},"ttl_seconds":300,"flow_file":"\#(flow)"}"#
    }.joined(separator: "\n") + "\n"
}

/// A cache in `tmp` with `entries` flows put into it, as `cache put` writes them, in `format` (nil: the default).
private func cache(in tmp: TemporaryDirectory, entries: Int, format: Int? = nil) throws -> String {
    let dir = tmp.file("cache")
    let put = try fpctl(
        [
            "cache", "put", "--cache-dir", dir, "--input",
            try writeLines(tmp, "in.jsonl", putLines("u", count: entries)),
        ],
        environment: format.map { ["FPCTL_CACHE_FORMAT": "\($0)"] } ?? [:])
    #expect(put.status == 0, "\(put.stderr)")
    return dir
}

private func writeLines(_ tmp: TemporaryDirectory, _ name: String, _ text: String) throws -> String {
    let path = tmp.file(name)
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

@Suite("fpctl cache on real directories and real processes")
struct CacheCommandTests {
    @Test("exit 66 for a missing directory, 65 for a newer format, 64 without a directory")
    func exitStatuses() throws {
        let tmp = try TemporaryDirectory()
        let missing = try fpctl("cache", "info", "--cache-dir", tmp.file("nope"))
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("no such cache directory"))
        try FileManager.default.createDirectory(atPath: tmp.file("future"), withIntermediateDirectories: true)
        try #"{"format":"fpcache","version":9}"#.write(
            toFile: tmp.file("future/fpcache.json"), atomically: true, encoding: .utf8)
        let future = try fpctl("cache", "list", "--cache-dir", tmp.file("future"))
        #expect(future.status == 65)
        #expect(future.stderr.contains("newer than this fpctl reads"))
        #expect(try fpctl(["cache", "info"], environment: ["FPCTL_CACHE_DIR": ""]).status == 64)
    }

    @Test("info, list and prune --dry-run report what put wrote; FPCTL_CACHE_DIR is the default directory")
    func reports() throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("cache")
        let lines = try writeLines(
            tmp, "in.jsonl", putLines("u", count: 3) + putLines("v", count: 2, placement: "onboarding"))
        #expect(try fpctl("cache", "put", "--cache-dir", dir, "--input", lines).status == 0)
        let info = try fpctl(["cache", "info", "--format", "json"], environment: ["FPCTL_CACHE_DIR": dir])
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        #expect(doc["flows"] as? Int == 5 && doc["fresh"] as? Int == 5 && doc["aliases"] as? Int == 2)
        let list = try fpctl("cache", "list", "--cache-dir", dir, "--user-id", "u-1", "--format", "csv")
        #expect(list.stdout.split(separator: "\n").count == 2)
        #expect(list.stdout.contains("paywall,u-1,"))
        let dry = try fpctl("cache", "prune", "--cache-dir", dir, "--user-id", "v-0", "--dry-run", "--format", "json")
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(dry.stdout.utf8)) as? [String: Any])
        #expect(plan["files"] as? Int == 1 && plan["dry_run"] as? Bool == true)
        #expect(
            try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv").stdout.split(separator: "\n").count == 6)
    }

    @Test("clear needs --force without a terminal, then empties what it names")
    func clear() throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("cache")
        let lines = try writeLines(
            tmp, "in.jsonl",
            putLines("u", count: 2)
                + #"{"image_url":"https://cdn/x.png","image_file":"\#(Paths.sample("demo"))/assets/logo.png"}"# + "\n")
        #expect(try fpctl("cache", "put", "--cache-dir", dir, "--input", lines).status == 0)
        let refused = try fpctl("cache", "clear", "--cache-dir", dir)
        #expect(refused.status == 64)
        #expect(try fpctl("cache", "clear", "--cache-dir", dir, "--flows", "--force").status == 0)
        let info = try fpctl("cache", "info", "--cache-dir", dir, "--format", "json").stdout
        #expect(info.contains(#""flows":0"#) && info.contains(#""images":1"#))
    }

    @Test(
        "two writers and a pruner at once: prune takes only what is older than its limit, every younger entry survives and verify is clean"
    )
    func concurrentWritersAndPruner() throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("cache")
        // Each writer's lines alternate between entries resolved in 2020 (older than the
        // prune's limit the moment they land, so the prunes remove them while the writer
        // goes on) and entries resolved now (never the prune's to take), then write the
        // fresh ones again (each key's older file removed by the writer, as the prune runs).
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        func lines(_ prefix: String, placement: String) -> String {
            func line(_ user: String, _ resolved: String?) -> String {
                let at = resolved.map { #","resolved_at":"\#($0)""# } ?? ""
                return #"{"placement":"\#(placement)","user_id":"\#(user)","flow_file":"\#(flow)"\#(at)}"#
            }
            let mixed = (0..<300).flatMap { i in
                [line("\(prefix)-old-\(i)", "2020-01-01T00:00:00Z"), line("\(prefix)-\(i)", nil)]
            }
            return (mixed + (0..<300).map { line("\(prefix)-\($0)", nil) }).joined(separator: "\n") + "\n"
        }
        // The cache exists before the first prune: a prune of a directory no writer has made yet is exit 66.
        let empty = try writeLines(tmp, "empty.jsonl", "")
        #expect(try fpctl("cache", "put", "--cache-dir", dir, "--input", empty).status == 0)
        let writers = [
            try writeLines(tmp, "a.jsonl", lines("a", placement: "paywall")),
            try writeLines(tmp, "b.jsonl", lines("b", placement: "onboarding")),
        ].map { input -> Process in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Paths.fpctl)
            p.arguments = ["cache", "put", "--cache-dir", dir, "--input", input]
            p.standardError = FileHandle.nullDevice
            try? p.run()
            return p
        }
        // Prunes for as long as a writer runs, and once after.
        var prunes = 0
        while prunes < 1 || writers.contains(where: \.isRunning) {
            let r = try fpctl("cache", "prune", "--cache-dir", dir, "--older-than", "1h")
            #expect(r.status == 0, "\(r.stderr)")
            prunes += 1
        }
        for w in writers {
            w.waitUntilExit()
            #expect(w.terminationStatus == 0)
        }
        #expect(try fpctl("cache", "prune", "--cache-dir", dir, "--older-than", "1h").status == 0)
        let verify = try fpctl("cache", "verify", "--cache-dir", dir)
        #expect(verify.status == 0, "\(verify.stdout)")
        let users = try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv").stdout
            .split(separator: "\n").dropFirst().map { $0.split(separator: ",")[1] }
        #expect(users.filter { $0.contains("-old-") }.isEmpty, "the last prune left an entry older than its limit")
        #expect(Set(users) == Set((0..<300).flatMap { ["a-\($0)", "b-\($0)"] }), "a fresh entry was lost")
    }

    @Test(
        "a writer killed with SIGKILL at random moments never leaves the cache unclean (even rounds format 1, odd 2)",
        arguments: 0..<8)
    func killedWriter(round: Int) throws {
        let format = round % 2 == 0 ? 1 : 2
        // Format 2 writes an entry in a fraction of the time: more of them, so the kill lands mid-run.
        let count = format == 1 ? 3000 : 30000
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("cache")
        let input = try writeLines(
            tmp, "in.jsonl",
            putLines("k\(round)", count: count)
                + (0..<200).map {
                    #"{"image_url":"https://cdn/\#($0).png","image_file":"\#(Paths.sample("demo"))/assets/welcome.png"}"#
                }.joined(separator: "\n"))
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Paths.fpctl)
        p.arguments = ["cache", "put", "--cache-dir", dir, "--input", input]
        p.environment = ProcessInfo.processInfo.environment.merging(["FPCTL_CACHE_FORMAT": "\(format)"]) { $1 }
        p.standardError = FileHandle.nullDevice
        try p.run()
        // The kill lands once the writer has made a seeded number of entries (format 1: key
        // directories; format 2: records, counted at 160 bytes each): a point of its writing chosen at
        // random, logged, and reached by a poll, not by a delay.
        let kill = try killAfter(
            p, progress: format == 1 ? keyDirectories("\(dir)/flows/paywall") : loggedRecords(dir), of: count,
            round: round)
        let verify = try fpctl("cache", "verify", "--cache-dir", dir)
        if format == 1 {
            #expect(verify.status == 0, "\(kill): \(verify.stdout)")
        } else {
            // A format-2 writer killed inside an append can leave a torn last record: debris, as a
            // dead writer's temporary file is, which readers stop at and --repair drops.
            let problems = verify.stdout.split(separator: "\n").filter { $0 != "ok" }
            #expect(problems.allSatisfy { $0.hasPrefix("cache-temp-debris: log/") }, "\(kill): \(verify.stdout)")
            if !problems.isEmpty {
                #expect(try fpctl("cache", "verify", "--cache-dir", dir, "--repair").status == 65)
            }
            #expect(try fpctl("cache", "verify", "--cache-dir", dir).stdout == "ok\n", "\(kill)")
        }
        let listed = try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv")
        #expect(listed.status == 0, "every entry the listing names is readable")
    }

    /// The POSIX path (mkstemp + rename, as on macOS), forced on Linux by
    /// `FPCTL_POSIX_FALLBACK=1` (`Platform`): every entry written, no temporary
    /// left; a writer killed mid-write leaves at most named temporaries of a dead
    /// process, which verify reports and --repair removes, and no damaged entry.
    @Test("the POSIX write path a Mac takes: whole entries, and only reportable debris when killed", arguments: 0..<3)
    func posixFallback(round: Int) throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("cache")
        // Format 1, whose every entry is a file published this way (format 2 publishes only its flows so).
        let posix = ["FPCTL_POSIX_FALLBACK": "1", "FPCTL_CACHE_FORMAT": "1"]
        let input = try writeLines(tmp, "in.jsonl", putLines("p\(round)", count: 2000))
        if round == 0 {
            let put = try fpctl("cache", "put", "--cache-dir", dir, "--input", input, environment: posix)
            #expect(put.status == 0, "\(put.stderr)")
            let files = try FileManager.default.subpathsOfDirectory(atPath: dir)
            #expect(!files.contains { ($0 as NSString).lastPathComponent.hasPrefix(".tmp-") }, "no temporary left")
            #expect(try fpctl("cache", "verify", "--cache-dir", dir).stdout == "ok\n")
            let listed = try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv")
            #expect(listed.stdout.split(separator: "\n").count - 1 == 2000)
            return
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Paths.fpctl)
        p.arguments = ["cache", "put", "--cache-dir", dir, "--input", input]
        p.environment = ProcessInfo.processInfo.environment.merging(posix) { _, new in new }
        p.standardError = FileHandle.nullDevice
        try p.run()
        let kill = try killAfter(p, progress: keyDirectories("\(dir)/flows/paywall"), of: 2000, round: round)
        let verify = try fpctl("cache", "verify", "--cache-dir", dir)
        let problems = verify.stdout.split(separator: "\n").filter { $0 != "ok" }
        #expect(problems.allSatisfy { $0.hasPrefix("cache-temp-debris:") }, "\(kill): \(verify.stdout)")
        if !problems.isEmpty {
            #expect(try fpctl("cache", "verify", "--cache-dir", dir, "--repair").status == 65)
        }
        #expect(try fpctl("cache", "verify", "--cache-dir", dir).stdout == "ok\n")
    }

    @Test("planted corrupt and foreign files: verify exits 65 naming them, --repair removes only them")
    func plantedDamage() throws {
        let tmp = try TemporaryDirectory()
        // Format 1's entry files (Format2StoreTests damages format 2's records and flows).
        let dir = try cache(in: tmp, entries: 3, format: 1)
        let entries = try FileManager.default.subpathsOfDirectory(atPath: "\(dir)/flows").filter {
            $0.hasSuffix(".json")
        }.sorted()
        try Data("{".utf8).write(to: URL(fileURLWithPath: "\(dir)/flows/\(entries[0])"))
        try Data().write(to: URL(fileURLWithPath: "\(dir)/flows/\(entries[1])"))
        try Data("hello".utf8).write(to: URL(fileURLWithPath: "\(dir)/README"))
        let verify = try fpctl("cache", "verify", "--cache-dir", dir)
        #expect(verify.status == 65)
        #expect(verify.stdout.split(separator: "\n").filter { $0.hasPrefix("cache-corrupt-entry:") }.count == 2)
        #expect(verify.stdout.contains("cache-foreign-file: README:"))
        let repair = try fpctl("cache", "verify", "--cache-dir", dir, "--repair")
        #expect(repair.status == 65 && repair.stdout.contains("removed: "))
        #expect(try fpctl("cache", "verify", "--cache-dir", dir).stdout == "ok\n")
        #expect(
            try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv").stdout.split(separator: "\n").count == 2)
    }

    @Test("--repair says so when a file it names cannot be removed (a read-only mount): not removed, status 73")
    func repairThatCannotRemove() throws {
        let tmp = try TemporaryDirectory()
        let dir = try cache(in: tmp, entries: 1, format: 1)
        let placement = try #require(try FileManager.default.contentsOfDirectory(atPath: "\(dir)/flows").first)
        let stray = "\(dir)/flows/\(placement)/stray.bin"
        try Data("junk".utf8).write(to: URL(fileURLWithPath: stray))
        // The placement's directory read-only for root too: a read-only bind mount (CI runs as root).
        let mount = try tool("mount")
        let folder = "\(dir)/flows/\(placement)"
        try #require(try run(mount, ["--bind", folder, folder]).status == 0)
        defer { _ = try? run(try tool("umount"), [folder]) }
        try #require(try run(mount, ["-o", "remount,ro,bind", folder]).status == 0)
        let repair = try fpctl("cache", "verify", "--cache-dir", dir, "--repair")
        #expect(repair.status == 73, "\(repair.stdout)\(repair.stderr)")
        #expect(
            repair.stdout
                == "not removed (Read-only file system (EROFS)): cache-foreign-file: flows/\(placement)/stray.bin: not part of the cache layout\n"
        )
        #expect(FileManager.default.fileExists(atPath: stray))
        let json = try fpctl("cache", "verify", "--cache-dir", dir, "--repair", "--format", "json")
        #expect(json.stdout.contains(#"],"not_removed":["# + "\n" + #"{"path":"flows/\#(placement)/stray.bin","#))
    }
}

/// How many key directories `directory` holds: a format-1 writer's progress.
func keyDirectories(_ directory: String) -> () -> Int {
    { (try? FileManager.default.contentsOfDirectory(atPath: directory))?.count ?? 0 }
}

/// About how many records a format-2 cache's segments hold: a writer's
/// progress. Their bytes over 160: a `cache put` record is 165 to 190 bytes
/// (170 on average for the ids these tests use), so the count never falls
/// short of what was written and a kill point drawn below 90% of the entries
/// is always reached (over 190, a point near 90% could not be: seed
/// 2202955016050149205, round 7).
func loggedRecords(_ cache: String) -> () -> Int {
    {
        let log = cache + "/log"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: log)) ?? []
        let bytes = names.filter { $0.hasSuffix(".seg") }.reduce(0) { total, name in
            total + (((try? FileManager.default.attributesOfItem(atPath: "\(log)/\(name)"))?[.size] as? Int) ?? 0)
        }
        return bytes / 160
    }
}

/// Kills `writer` with SIGKILL once `progress` reaches a number drawn from a
/// seed (`FPCTL_TEST_SEED`, or a new one each run) in 0..<`total`: a point of
/// the writing chosen at random, reached by polling, and said in the returned
/// text for the test's messages so a failure can be replayed. The writer must
/// still be running then.
func killAfter(_ writer: Process, progress: () -> Int, of total: Int, round: Int) throws -> String {
    let seed =
        ProcessInfo.processInfo.environment["FPCTL_TEST_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0 ... .max)
    // SplitMix64 of the seed and the round: the same seed gives every round the same point.
    var z = seed &+ UInt64(round + 1) &* 0x9E37_79B9_7F4A_7C15
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    let target = Int((z ^ (z >> 31)) % UInt64(total * 9 / 10))
    let said = "FPCTL_TEST_SEED=\(seed) round \(round): killed after \(target) of \(total) entries"
    let deadline = Date().addingTimeInterval(60)
    while progress() < max(1, target) {
        try #require(writer.isRunning && Date() < deadline, "the writer ended before the kill (\(said))")
        usleep(500)
    }
    try #require(writer.isRunning, "the writer ended before the kill (\(said))")
    kill(writer.processIdentifier, SIGKILL)
    writer.waitUntilExit()
    #expect(writer.terminationReason == .uncaughtSignal, "\(said): the writer was not killed")
    return said
}
