import Foundation
import Testing

/// `fpctl warm --resume`: an attempt killed or failed, then resumed, against
/// a real `fpctl serve` that counts the requests it gets.
@Suite("warm --resume: killed and failed attempts resumed, merged by report, refused inputs")
struct WarmResumeTests {
    let tmp: TemporaryDirectory

    init() throws { tmp = try TemporaryDirectory() }

    func identities(_ count: Int) throws -> String { try tmp.identities(count) }

    func warmArguments(_ server: ServeProcess, _ ids: String, cache: String, _ extra: [String] = []) -> [String] {
        [
            "warm", "onboarding", "paywall", "--api-url", server.url, "--app-id", "demo", "--media", "none",
            "--identities", ids, "--cache-dir", tmp.file(cache), "--format", "json", "--run-id", "r1",
        ] + extra
    }

    func routes(_ server: ServeProcess) async throws -> [String: Int] {
        try #require(try await http(.GET, server.url + "/_admin/stats").json?["routes"] as? [String: Int])
    }

    func report(_ files: String...) throws -> (status: Int32, total: [String]) {
        let result = try fpctl(["report", "--format", "csv"] + files)
        let total = result.stdout.split(separator: "\n").first { $0.hasPrefix("TOTAL,") }
        return (
            result.status,
            total.map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) } ?? []
        )
    }

    @Test(
        "kill -9 halfway, then --resume into a new cache: one extra batch at most per identity in flight, and report counts every pair once"
    )
    func killedThenResumed() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "100"])
        let ids = try identities(400)
        let old = tmp.file("old.json")
        _ = FileManager.default.createFile(atPath: old, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Paths.fpctl)
        process.arguments = warmArguments(server, ids, cache: "c1", ["--concurrency", "16"])
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: old))
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Killed once about a third of the rows are out, whatever the machine's speed.
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning, Date() < deadline {
            let rows = (try? String(contentsOfFile: old, encoding: .utf8))?.split(separator: "\n").count ?? 0
            if rows > 250 { break }
            usleep(10_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal, "the warm ended before it was killed")
        let before = try await routes(server)["resolve-batch"] ?? 0

        let resumed = try fpctl(warmArguments(server, ids, cache: "c2", ["--resume", old, "--concurrency", "16"]))
        #expect(resumed.status == 0, "\(resumed.stderr)")
        try resumed.stdout.write(toFile: tmp.file("new.json"), atomically: true, encoding: .utf8)
        let batches = try await routes(server)["resolve-batch"] ?? 0
        // In flight: up to 16 resolving and 16 more whose flows waited for their commit.
        #expect(batches >= 400 && batches <= 400 + 2 * 16, "\(before) batches before the kill, \(batches) in all")

        let merged = try report(old, tmp.file("new.json"))
        #expect(merged.status == 0)
        // TOTAL: identities, warmed: each of the 400 identities' two placements once.
        #expect(merged.total.count > 3 && merged.total[1] == "800" && merged.total[2] == "800", "\(merged.total)")
        let alone = try fpctl("report", tmp.file("new.json"))
        #expect(alone.status == 0)
        let oldAlone = try fpctl("report", old)
        #expect(oldAlone.status == 65, "a killed output alone is still refused")
    }

    @Test("a failed attempt resumed: only its failed pairs are tried again, and report counts them as warmed once")
    func failedThenResumed() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let faults = try await http(
            .POST, server.url + "/_admin/faults",
            json: ["fail_rate": 1, "fail_status": 503, "placements": ["paywall"]])
        #expect(faults.status == 200)
        let ids = try identities(30)
        let first = try fpctl(warmArguments(server, ids, cache: "c", ["--retries", "0", "--no-batch"]))
        #expect(first.status == 3, "\(first.stderr)")
        try first.stdout.write(toFile: tmp.file("first.json"), atomically: true, encoding: .utf8)
        _ = try await http(.DELETE, server.url + "/_admin/faults")
        _ = try await http(.DELETE, server.url + "/_admin/stats")

        let second = try fpctl(warmArguments(server, ids, cache: "c", ["--resume", tmp.file("first.json")]))
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("30 pairs warmed or without a flow there, 30 failed ones tried again"))
        try second.stdout.write(toFile: tmp.file("second.json"), atomically: true, encoding: .utf8)
        // One placement left per identity: a single resolve each, never onboarding again.
        let routes = try await routes(server)
        #expect(routes["resolve"] == 30 && routes["resolve-batch"] == nil, "\(routes)")
        let merged = try report(tmp.file("first.json"), tmp.file("second.json"))
        #expect(merged.status == 0)
        #expect(merged.total.count > 8 && merged.total[2] == "60" && merged.total[8] == "0", "\(merged.total)")
    }

    @Test(
        "--resume refuses, with one line and exit 65, another placement's, another shard's or run's output and a non-warm file; 66 a missing one"
    )
    func refusals() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let ids = try identities(40)
        let whole = try fpctl(warmArguments(server, ids, cache: "c"))
        #expect(whole.status == 0)
        try whole.stdout.write(toFile: tmp.file("whole.json"), atomically: true, encoding: .utf8)
        try "just text\n".write(toFile: tmp.file("text.json"), atomically: true, encoding: .utf8)
        // A killed copy: its run (on the last line) is gone, so only its rows can tell.
        let cut = whole.stdout.split(separator: "\n").dropLast().joined(separator: "\n")
        try cut.write(toFile: tmp.file("cut.json"), atomically: true, encoding: .utf8)

        let cases: [(arguments: [String], status: Int32, says: String)] = [
            (["warm", "onboarding", "--resume", tmp.file("whole.json")], 65, "rows of placement paywall"),
            (["warm", "onboarding", "paywall", "--resume", tmp.file("cut.json"), "--shard", "1/2"], 65, "of shard"),
            (["warm", "onboarding", "paywall", "--resume", tmp.file("whole.json"), "--shard", "1/2"], 65, "of shard"),
            (
                ["warm", "onboarding", "paywall", "--resume", tmp.file("whole.json"), "--run-id", "r2"], 65,
                "its run is r1"
            ),
            (
                ["warm", "onboarding", "paywall", "--resume", tmp.file("text.json")], 65,
                "not a warm JSON document"
            ),
            (["warm", "onboarding", "paywall", "--resume", tmp.file("nope.json")], 66, "no such warm output"),
        ]
        for c in cases {
            let result = try fpctl(
                c.arguments + [
                    "--api-url", server.url, "--app-id", "demo", "--identities", ids, "--cache-dir", tmp.file("r"),
                ])
            #expect(result.status == c.status, "\(c.arguments): \(result.stderr)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains(c.says), "\(c.arguments): \(result.stderr)")
        }
    }
}
