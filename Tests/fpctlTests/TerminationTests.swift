import Foundation
import Testing

/// SIGTERM and SIGINT, as Kubernetes (eviction, a drain, a deleted Job) and CI
/// runners (cancel) send them: warm stops cleanly and its output stays one
/// whole JSON document that a retried attempt resumes from; a second signal
/// ends it at once; other commands leave no temporary file; serve finishes the
/// requests it has. fpctl(1), SIGNALS.
@Suite("signals: warm stops cleanly and resumes, a second signal ends at once, no temporary file left, serve drains")
struct TerminationTests {
    let tmp: TemporaryDirectory

    init() throws {
        tmp = try TemporaryDirectory()
        // fpctl keeps a signal its parent ignored (nohup), and a test runner
        // may be started with SIGTERM or SIGINT ignored: the children here
        // must get them as Kubernetes' and a shell's children do.
        signal(SIGTERM, SIG_DFL)
        signal(SIGINT, SIG_DFL)
    }

    func identities(_ count: Int) throws -> String { try tmp.identities(count) }

    func batches(_ server: ServeProcess) async throws -> Int {
        let routes = try #require(try await http(.GET, server.url + "/_admin/stats").json?["routes"] as? [String: Int])
        return routes["resolve-batch"] ?? 0
    }

    /// `fpctl warm PLACEMENTS` against `server` over `ids`, into this test's cache, no media.
    func warm(_ server: ServeProcess, _ ids: String, _ placements: [String], _ extra: [String] = []) -> [String] {
        ["warm"] + placements + [
            "--api-url", server.url, "--app-id", "demo", "--media", "none", "--identities", ids, "--cache-dir",
            tmp.file("cache"),
        ] + extra
    }

    /// The hidden temporary files (`.NAME.tmp-PID-…`) in this test's directory.
    func temporaryFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: tmp.path)) ?? []).filter { $0.contains(".tmp-") }
    }

    /// Starts fpctl with its standard output in `stdout` (a file) and standard error in `stdout.err`.
    func start(
        _ arguments: [String], stdout: String, executable: String = Paths.fpctl, environment: [String: String] = [:]
    ) throws -> Process {
        _ = FileManager.default.createFile(atPath: stdout, contents: nil)
        _ = FileManager.default.createFile(atPath: stdout + ".err", contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdout))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stdout + ".err"))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Polls `condition` every 20 ms until it holds; fails the test after 60 s.
    func waitFor(_ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(60)
        while try !condition() {
            try #require(Date() < deadline, "waited 60 s for \(what)")
            usleep(20_000)
        }
    }

    /// Waits until `path` has more than `lines` lines (or 60 s pass).
    func waitForLines(_ path: String, _ lines: Int, while process: Process) {
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning, Date() < deadline {
            let count = (try? String(contentsOfFile: path, encoding: .utf8))?.split(separator: "\n").count ?? 0
            if count > lines { return }
            usleep(10_000)
        }
    }

    /// The (fingerprint, placement) pairs of a warm JSON document's rows, by state.
    func rows(_ path: String) throws -> [(fingerprint: String, placement: String, state: String)] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let document = try #require(
            try JSONSerialization.jsonObject(with: data) as? [String: Any], "not one JSON document")
        let rows = try #require(document["rows"] as? [[String: Any]])
        return rows.map {
            ($0["fingerprint"] as? String ?? "", $0["placement"] as? String ?? "", $0["state"] as? String ?? "")
        }
    }

    @Test(
        "SIGTERM mid-run: exit 75 within the stop bound, --output-dir's file is one whole JSON document, the retried attempt sends no request for a finished pair, report counts every pair once, cache verify is clean"
    )
    func stoppedThenResumed() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "200"])
        let ids = try identities(300)
        let results = tmp.file("results")
        try FileManager.default.createDirectory(atPath: results, withIntermediateDirectories: true)
        let arguments = warm(
            server, ids, ["onboarding", "paywall"],
            [
                "--concurrency", "16", "--shard", "job/2", "--run-id", "r1", "--output-dir", results,
                "--metrics-file", tmp.file("warm.prom"),
            ])
        let environment = ["JOB_COMPLETION_INDEX": "1"]
        let first = try start(arguments, stdout: tmp.file("first.out"), environment: environment)
        let attempt1 = "\(results)/r1/shard-2-of-2.attempt-001.json"
        waitForLines(attempt1, 60, while: first)
        #expect(first.isRunning, "the warm ended before it was stopped")
        let signalled = Date()
        kill(first.processIdentifier, SIGTERM)
        first.waitUntilExit()
        let stopping = Date().timeIntervalSince(signalled)
        #expect(first.terminationReason == .exit && first.terminationStatus == 75, "\(first.terminationStatus)")
        // In flight: 16 identities, each one batch of 200 ms: far inside the 10 s bound.
        #expect(stopping < 10, "stopping took \(stopping)s")
        let stopped = try rows(attempt1)
        #expect(stopped.count > 60 && stopped.count < 300, "\(stopped.count) rows")
        // Every identity that has rows has both placements' (no half-reported identity).
        let byIdentity = Dictionary(grouping: stopped, by: \.fingerprint)
        #expect(byIdentity.values.allSatisfy { $0.count == 2 })
        #expect(stopped.allSatisfy { $0.state == "warmed" })
        #expect(
            FileManager.default.fileExists(atPath: tmp.file("warm.prom")), "the metrics are written at a clean stop")
        // A stop ends the cache as a normal end does: every segment the writer made is sealed (its index published).
        let log = try FileManager.default.contentsOfDirectory(atPath: tmp.file("cache") + "/log")
        let segments = log.filter { $0.hasSuffix(".seg") }
        #expect(!segments.isEmpty && segments.allSatisfy { log.contains($0 + ".idx") }, "\(log.sorted())")

        let before = try await batches(server)
        let second = try fpctl(arguments, environment: environment)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("attempt 2"), "\(second.stderr)")
        let sent = try await batches(server) - before
        let attempt2 = try rows("\(results)/r1/shard-2-of-2.attempt-002.json")
        // Nothing finished in attempt 1 is asked for again: one batch per identity left.
        let again = Set(attempt2.map(\.fingerprint)).intersection(byIdentity.keys)
        #expect(again.isEmpty, "\(again.count) identities finished in attempt 1 were warmed again")
        #expect(sent == Set(attempt2.map(\.fingerprint)).count, "\(sent) batches for \(attempt2.count / 2) identities")

        // The whole shard, once: report over the run's directory merges both attempts.
        let report = try fpctl("report", "--format", "csv", "\(results)/r1")
        #expect(report.status == 0, "\(report.stderr)")
        let total = report.stdout.split(separator: "\n").first { $0.hasPrefix("TOTAL,") }?.split(separator: ",")
        let shardIdentities = byIdentity.count + Set(attempt2.map(\.fingerprint)).count
        // TOTAL's identities and warmed count (identity, placement) pairs: two an identity.
        #expect(total.map { String($0[1]) } == String(shardIdentities * 2), "\(report.stdout)")
        #expect(total.map { String($0[2]) } == String(shardIdentities * 2), "\(report.stdout)")
        #expect(shardIdentities > 100 && shardIdentities < 200, "shard 2 of 2 holds about half of 300")

        let verify = try fpctl("cache", "verify", "--cache-dir", tmp.file("cache"))
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
    }

    @Test("SIGTERM on warm --format json to standard output: the document is whole (jq reads it) and exit is 75")
    func stoppedStandardOutput() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "200"])
        let ids = try identities(300)
        let out = tmp.file("out.json")
        let process = try start(
            warm(server, ids, ["onboarding", "paywall"], ["--concurrency", "8", "--format", "json"]), stdout: out)
        waitForLines(out, 20, while: process)
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 75)
        let stopped = try rows(out)
        #expect(stopped.count > 20 && stopped.count < 600)
        let err = try String(contentsOfFile: out + ".err", encoding: .utf8)
        #expect(err.contains("SIGINT: stopping") && err.contains("stopped by a signal"), "\(err)")
    }

    @Test("a signal ignored by fpctl's parent (nohup) stays ignored: warm runs to its end")
    func inheritedIgnore() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "300"])
        let ids = try identities(20)
        // The shell ignores SIGTERM before it execs fpctl, as nohup does with SIGHUP.
        let out = tmp.file("ignored.json")
        let process = try start(
            ["-c", "trap '' TERM; exec \"$0\" \"$@\"", Paths.fpctl]
                + warm(server, ids, ["onboarding"], ["--format", "json"]),
            stdout: out, executable: "/bin/sh")
        waitForLines(out, 1, while: process)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        #expect(try rows(out).count == 20)
    }

    @Test("a second signal ends warm at once, by that signal, and its metrics file's temporary file is removed")
    func secondSignal() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "8000"])
        let ids = try identities(50)
        let out = tmp.file("out.txt")
        let process = try start(
            warm(server, ids, ["onboarding"], ["--timeout", "20s", "--metrics-file", tmp.file("m.prom")]), stdout: out)
        // The first signal once identities are in flight: the backend holds their requests 8 s.
        let curl = try tool("curl")
        try waitFor("requests in flight at the backend") {
            let stats = try run(curl, ["-sf", server.url + "/_admin/stats"]).stdout
            let json = try? JSONSerialization.jsonObject(with: Data(stats.utf8)) as? [String: Any]
            return (json?["in_flight"] as? Int ?? 0) > 0
        }
        kill(process.processIdentifier, SIGTERM)
        // warm says it is stopping once it has taken the first signal; it then waits for those identities.
        try waitFor("warm's stopping line") {
            ((try? String(contentsOfFile: out + ".err", encoding: .utf8)) ?? "").contains("stopping: no new identities")
        }
        #expect(process.isRunning, "the first signal waits for the identities in flight")
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        #expect(!process.isRunning, "a second signal ends it at once")
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGTERM)
        #expect(temporaryFiles().isEmpty, "\(temporaryFiles())")
        #expect(!FileManager.default.fileExists(atPath: tmp.file("m.prom")))
    }

    @Test(
        "SIGTERM during resolve --output: ended by the signal, the file it would replace as it was, no temporary file")
    func otherCommandsLeaveNothing() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "8000"])
        let target = tmp.file("flow.json")
        try "mine\n".write(toFile: target, atomically: false, encoding: .utf8)
        let process = try start(
            [
                "resolve", "paywall", "--api-url", server.url, "--app-id", "demo", "--user-id", "u1",
                "--cache-dir", tmp.file("cache"), "--timeout", "20s", "--output", target, "--overwrite",
            ], stdout: tmp.file("resolve.out"))
        // The temporary file exists while the resolve waits for the backend.
        let deadline = Date().addingTimeInterval(10)
        while temporaryFiles().isEmpty, Date() < deadline { usleep(10_000) }
        #expect(!temporaryFiles().isEmpty, "resolve --output makes its temporary file first")
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGTERM)
        #expect(temporaryFiles().isEmpty, "\(temporaryFiles())")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "mine\n")
    }

    @Test("SIGTERM to serve with a request in flight: the request gets its answer, then serve exits 0")
    func serveDrains() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "1500"])
        async let answer = resolve(server, "paywall")
        // The signal goes once the server is answering it (a loaded machine may take a while to send it).
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let stats = try await http(.GET, server.url + "/_admin/stats").json
            if (stats?["in_flight"] as? Int ?? 0) > 0 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(server.process.processIdentifier, SIGTERM)
        let result = try await answer
        #expect(result.status == 200 && flowID(result) != nil, "\(result.status) \(result.text)")
        server.process.waitUntilExit()
        #expect(server.process.terminationStatus == 0, "\(server.stderr)")
    }
}
