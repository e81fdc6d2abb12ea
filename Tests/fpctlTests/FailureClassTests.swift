import Foundation
import Testing

/// Each class of resolve failure, from a real `fpctl serve` or a real refused
/// port, gives its error code in the warm row and the documented exit status.
@Suite("failure classes: error code and exit status")
struct FailureClassTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let serve: [String]?
        let warm: [String]
        let code: String
        let status: Int32
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "wrong API key", serve: ["--api-key-file", "KEY"], warm: ["--api-key-file", "WRONG"],
            code: "unauthorized", status: 3),
        Case(name: "no API key", serve: ["--api-key-file", "KEY"], warm: [], code: "unauthorized", status: 3),
        Case(name: "unknown app", serve: [], warm: ["--app-id", "nope"], code: "unknown_app", status: 3),
        Case(
            name: "server error", serve: ["--fail-rate", "1", "--fail-status", "500"], warm: [], code: "http_500",
            status: 3),
        Case(
            name: "slower than the timeout", serve: ["--latency", "1500"],
            warm: ["--timeout", "100ms", "--grace", "0s"],
            code: "timeout", status: 3),
        Case(name: "refused port", serve: nil, warm: [], code: "unreachable", status: 69),
    ]

    @Test("code and exit status", arguments: cases)
    func failureClass(_ c: Case) throws {
        let tmp = try TemporaryDirectory()
        try "right-key\n".write(toFile: tmp.file("key"), atomically: true, encoding: .utf8)
        try "wrong-key\n".write(toFile: tmp.file("wrong"), atomically: true, encoding: .utf8)
        func substitute(_ args: [String]) -> [String] {
            args.map { $0 == "KEY" ? tmp.file("key") : $0 == "WRONG" ? tmp.file("wrong") : $0 }
        }
        let server = try c.serve.map { try ServeProcess([Paths.sample("demo"), "-q"] + substitute($0)) }
        let url = server?.url ?? "http://127.0.0.1:9"  // the discard port: nothing listens on loopback
        var args = [
            "warm", "paywall", "--cache-dir", tmp.file("cache"), "--api-url", url, "--user-id", "u",
            "--media", "none", "--retries", "0", "--format", "json",
        ]
        if !c.warm.contains("--app-id") { args += ["--app-id", "demo"] }
        let r = try fpctl(args + substitute(c.warm), environment: ["FLOWPILOT_API_KEY": ""])
        #expect(r.status == c.status, "\(r.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let row = (json?["rows"] as? [[String: Any]])?.first
        #expect(row?["state"] as? String == "failed")
        #expect((row?["error"] as? [String: Any])?["code"] as? String == c.code, "\(r.stdout)")
        #expect(
            !r.stdout.contains("right-key") && !r.stderr.contains("right-key") && !r.stdout.contains("wrong-key"),
            "the API key is never printed")
    }
}

/// When no request reaches the backend, every command that talks to it exits 69,
/// as warm does: resolve and ready (with no flow to offer), pull and diff.
@Suite("nothing reached the backend: resolve, ready, bundle pull and bundle diff exit 69")
struct UnavailableStatusTests {
    /// A port nobody listens on, and a proxy nobody listens on in front of a live server.
    static let backends: [[String]] = [
        ["--api-url", "http://127.0.0.1:9"],
        ["--api-url", "http://example.invalid", "--proxy", "http://127.0.0.1:9"],
    ]

    @Test("each command, each way of not getting there", arguments: backends)
    func unavailable(_ backend: [String]) throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let cache = tmp.file("cache")
        let commands: [[String]] = [
            ["resolve", "paywall", "--user-id", "a", "--cache-dir", cache],
            ["resolve", "paywall", "--user-id", "a", "--cache-dir", cache, "--format", "json"],
            ["ready", "paywall", "--user-id", "a", "--cache-dir", cache],
            ["bundle", "pull", "paywall", "onboarding", "-o", tmp.file("pulled")],
            ["bundle", "diff", bundle],
        ]
        for command in commands {
            let r = try fpctl(command + backend + ["--app-id", "demo"])
            #expect(r.status == 69, "\(command): \(r.status) \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: tmp.file("pulled")), "pull wrote a source anyway")
        }
        // A flow from another tier still answers: resolve with the bundle exits 0.
        let fallback = try fpctl(
            ["resolve", "paywall", "--user-id", "a", "--cache-dir", cache, "--bundle", bundle, "--app-id", "demo"]
                + backend)
        #expect(fallback.status == 0, "\(fallback.stderr)")
    }

    /// A loopback port whose accept queue is full, so a connect to it waits
    /// for an answer that never comes (Linux drops the SYN), as a nameserver
    /// or a host that never answers: what `--timeout` runs out on.
    static func blackhole() throws -> PythonProcess {
        try PythonProcess(
            """
            import select, signal, socket
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(0)
            port = s.getsockname()[1]
            fill = []
            for i in range(4):
                c = socket.socket(); c.setblocking(False)
                try: c.connect(("127.0.0.1", port))
                except BlockingIOError: pass
                fill.append(c)
            # The queue's connections complete their handshakes; the rest wait as fpctl's will.
            select.select([], fill, [], 0.5)
            print(port, flush=True)
            signal.pause()
            """)
    }

    @Test(
        "--timeout passing while the connect is pending is 69 with warm's line; passing while the answer is awaited is 1 (#64)"
    )
    func timeoutBeforeConnect() throws {
        let hole = try Self.blackhole()
        let tmp = try TemporaryDirectory()
        let backend = ["--api-url", "http://127.0.0.1:\(hole.port)", "--app-id", "demo", "--user-id", "a"]
        let common = backend + ["--cache-dir", tmp.file("cache"), "--timeout", "2s"]
        let line = "no request reached the backend: unreachable: connect timed out"
        for command in [["resolve", "paywall"], ["ready", "paywall"], ["warm", "paywall", "--media", "none"]] {
            let r = try fpctl(command + common)
            #expect(r.status == 69, "\(command): \(r.status) \(r.stdout)\(r.stderr)")
            #expect(r.stderr.contains(line) || r.stdout.contains("unreachable: connect timed out"), "\(r.stderr)")
        }
        let json = try fpctl(["resolve", "paywall", "--format", "json"] + common)
        #expect(json.status == 69)
        #expect(
            json.stdout.contains(#""error":{"code":"unreachable","message":"connect timed out"}"#), "\(json.stdout)")
        // A backend that accepted the request and answers after the timeout: reached, a timeout (1), on time.
        let slow = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "5000"])
        let started = Date()
        let late = try fpctl(
            "resolve", "paywall", "--api-url", slow.url, "--app-id", "demo", "--user-id", "a", "--cache-dir",
            tmp.file("cache2"), "--timeout", "1s")
        #expect(late.status == 1, "\(late.status): \(late.stdout)\(late.stderr)")
        #expect(late.stdout.contains("tier 1 live resolve: failed (timeout"), "\(late.stdout)")
        #expect(Date().timeIntervalSince(started) < 4.5, "the timeout is the caller's, not the backend's 5 s")
    }

    @Test("resolve --format json: each tier tried, its outcome and why, then the result")
    func jsonTrace() throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let r = try fpctl(
            "resolve", "paywall", "--user-id", "alice", "--cache-dir", tmp.file("cache"), "--bundle", bundle,
            "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--format", "json")
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(doc["placement"] as? String == "paywall")
        #expect(doc["user_id"] as? String == "alice")
        let tiers = try #require(doc["tiers"] as? [[String: Any]])
        #expect(tiers.map { $0["tier"] as? Int } == [0, 1, 2, 3])
        #expect(tiers.map { $0["outcome"] as? String } == ["miss", "failed", "miss", "served"])
        #expect(tiers.map { $0["source"] as? String } == ["cache", "live_resolve", "stale_cache", "bundled_default"])
        #expect((tiers[1]["error"] as? [String: Any])?["code"] as? String == "unreachable")
        #expect((tiers[0]["reason"] as? String) == "no entry for this identity")
        let result = try #require(doc["result"] as? [String: Any])
        #expect(result["state"] as? String == "warmed")
        #expect(result["delivery_source"] as? String == "bundled_default")
        #expect(result["tier"] as? Int == 3)
        #expect(result["flow_id"] as? String == "flow_paywall")
        #expect(doc["schema_version"] as? Int == 1)
        let csv = try fpctl(
            "resolve", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--format", "csv")
        #expect(csv.status == 64)
    }
}
