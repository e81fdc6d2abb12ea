import Foundation
import Testing

/// Numbers from a backend, an input file or a flag that do not fit: an invalid
/// row or response, or a usage error naming the range; never a trap, and never
/// an entry that `cache verify` would then call corrupt.
@Suite("numbers out of range (TTLs from a backend, an input file, a flag) and the URL serve prints")
struct NumberRangeTests {
    /// A resolve backend on loopback (Python's http.server) that answers every
    /// single and batch resolve with the demo's paywall flow and `ttl` as its
    /// cache_ttl_seconds, written as it stands in `ttl`.
    final class FixedBackend {
        let python: PythonProcess
        var url: String { "http://127.0.0.1:\(python.port)" }

        init(ttl: String) throws {
            let script = """
                import http.server, sys
                flow = open(sys.argv[1]).read()
                class H(http.server.BaseHTTPRequestHandler):
                    def do_POST(self):
                        self.rfile.read(int(self.headers.get("Content-Length", 0)))
                        if self.path.endswith("/resolve-batch"):
                            body = '{"results":[{"placement_key":"paywall","flow":%s,"cache_ttl_seconds":\(ttl)}]}' % flow
                        else:
                            body = '{"placement_key":"paywall","flow":%s,"cache_ttl_seconds":\(ttl)}' % flow
                        data = body.encode()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                    def log_message(self, *a): pass
                s = http.server.HTTPServer(("127.0.0.1", 0), H)
                print(s.server_address[1], flush=True)
                s.serve_forever()
                """
            python = try PythonProcess(script, arguments: [Paths.sample("demo") + "/flows/paywall.json"])
        }
    }

    @Test(
        "a backend's cache_ttl_seconds out of range fails the placement, caches nothing, traps nowhere",
        arguments: ["9223372036854775807", "1e300", "-5"])
    func backendTTL(ttl: String) throws {
        let backend = try FixedBackend(ttl: ttl)
        let tmp = try TemporaryDirectory()
        let cache = tmp.file("cache")
        let warm = try fpctl(
            "warm", "paywall", "--api-url", backend.url, "--app-id", "demo", "--user-id", "u-1",
            "--cache-dir", cache, "--format", "csv", "--media", "none")
        #expect(warm.status == 3, "\(warm.status): \(warm.stderr)")
        #expect(!warm.stderr.contains("Fatal error"))
        #expect(warm.stdout.contains("invalid_response"), "\(warm.stdout)")
        #expect(warm.stdout.contains("out of range"), "\(warm.stdout)")
        let list = try fpctl("cache", "list", "--cache-dir", cache, "--format", "csv")
        #expect(!list.stdout.contains("paywall,u-1"))
        let resolve = try fpctl(
            "resolve", "paywall", "--api-url", backend.url, "--app-id", "demo", "--user-id", "u-1",
            "--cache-dir", tmp.file("cache2"))
        #expect(resolve.status == 1, "\(resolve.status): \(resolve.stderr)")
        #expect(
            resolve.stdout.contains("invalid_response: cache_ttl_seconds") && resolve.stdout.contains("out of range"))
    }

    @Test("a backend's largest TTL is cached, and verify finds the entry sound")
    func largestTTL() throws {
        let backend = try FixedBackend(ttl: "2147483647")
        let tmp = try TemporaryDirectory()
        let cache = tmp.file("cache")
        let warm = try fpctl(
            "warm", "paywall", "--api-url", backend.url, "--app-id", "demo", "--user-id", "u-1",
            "--cache-dir", cache, "--media", "none")
        #expect(warm.status == 0, "\(warm.stderr)")
        #expect(try fpctl("cache", "verify", "--cache-dir", cache).status == 0)
    }

    @Test(
        "cache put: a ttl_seconds out of range is an invalid line (65) naming the field; nothing is written",
        arguments: ["9223372036854775807", "1e300", "-5"])
    func putTTL(ttl: String) throws {
        let tmp = try TemporaryDirectory()
        let input = tmp.file("in.jsonl")
        try writePutLine(input, ttl: ttl)
        let r = try fpctl("cache", "put", "--cache-dir", tmp.file("cache"), "--input", input)
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.contains("ttl_seconds") && r.stderr.contains("out of range (0 to 2147483647 seconds)"))
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        let list = try fpctl("cache", "list", "--cache-dir", tmp.file("cache"), "--format", "csv")
        #expect(!list.stdout.contains("paywall,u-1"))
    }

    @Test(
        "cache put: a resolved_at before 1970 or not a time is an invalid line (65); nothing is written",
        arguments: [("1969-12-31T23:59:59Z", "is before 1970"), ("yesterday", "must be an RFC 3339 time")])
    func putResolvedAt(resolvedAt: String, message: String) throws {
        let tmp = try TemporaryDirectory()
        let input = tmp.file("in.jsonl")
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        try #"{"placement":"paywall","user_id":"u-1","flow_file":"\#(flow)","resolved_at":"\#(resolvedAt)"}"#
            .write(toFile: input, atomically: true, encoding: .utf8)
        let now = ["FPCTL_NOW": "2026-11-01T10:00:00Z"]
        let r = try fpctl(["cache", "put", "--cache-dir", tmp.file("cache"), "--input", input], environment: now)
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.hasPrefix("fpctl: error: put-field: \(input):1: resolved_at "), "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        let list = try fpctl(["cache", "list", "--cache-dir", tmp.file("cache"), "--format", "csv"], environment: now)
        #expect(!list.stdout.contains("paywall,u-1"))
    }

    @Test("serve --ttl out of range is a usage error that names the range")
    func serveTTL() throws {
        let r = try fpctl("serve", Paths.sample("demo"), "--port", "0", "--ttl", "9223372036854775807")
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("--ttl 9223372036854775807: use 0 to 2147483647 seconds"))
    }

    @Test(
        "option numbers out of range are usage errors (64) that say the range, negative ones too",
        arguments: [
            (["--concurrency", "9223372036854775807"], "--concurrency 9223372036854775807: use 1 to 10000"),
            (["--concurrency", "-1"], "--concurrency -1: use 1 to 10000"),
            (["--media-concurrency", "0"], "--media-concurrency 0: use 1 to 10000"),
            (["--timeout", "9223372036854775s"], "--timeout 9223372036854775s: use more than 0s to 1h"),
            (["--timeout", "-1s"], "--timeout -1s: use more than 0s to 1h"),
            (["--grace", "9223372036854775s"], "--grace 9223372036854775s: use 0s to 1h"),
            (["--retries", "-1"], "--retries -1: use 0 to 100"),
        ])
    func warmOptions(extra: [String], message: String) throws {
        let r = try fpctl(
            ["warm", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--user-id", "u"] + extra)
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(!r.stderr.contains("Missing value"))
    }

    @Test(
        "warm options that contradict each other are usage errors (64) that say why, before anything is written",
        arguments: [
            (["--identities", "ids.jsonl", "--user-id", "u"], "--identities many: give one or the other"),
            (["--identities", "ids.jsonl", "--attribute", "plan=pro"], "--identities many: give one or the other"),
            (["--output-dir", "out"], "--output-dir needs --run-id"),
            (["--output-dir", "out", "--run-id", "r", "--resume", "old.json"], "leave out --resume"),
            (
                ["--output-dir", "out", "--run-id", "../r"],
                "--run-id ../r: with --output-dir the run id names a directory"
            ),
            (["--output-dir", "out", "--run-id", ".r"], "--run-id .r: with --output-dir the run id names a directory"),
            (["--shard", "job/0"], "The value 'job/0' is invalid for '--shard"),
        ])
    func warmCombinations(extra: [String], message: String) throws {
        let tmp = try TemporaryDirectory()
        try "{\"user_id\":\"a\"}\n".write(toFile: tmp.file("ids.jsonl"), atomically: true, encoding: .utf8)
        let r = try fpctl(
            ["warm", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--cache-dir", "c"] + extra,
            currentDirectory: tmp.path)
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.path) == ["ids.jsonl"], "nothing written")
    }

    @Test("--shard job/N without JOB_COMPLETION_INDEX, or with one outside 0..N-1, is a usage error naming it")
    func jobShard() throws {
        let base = ["warm", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--user-id", "u"]
        let tmp = try TemporaryDirectory()
        let unset = try fpctl(base + ["--cache-dir", tmp.file("c"), "--shard", "job/4"])
        #expect(unset.status == 64 && unset.stderr.contains("JOB_COMPLETION_INDEX is not set"), "\(unset.stderr)")
        for index in ["4", "-1", "x"] {
            let bad = try fpctl(
                base + ["--cache-dir", tmp.file("c"), "--shard", "job/4"], environment: ["JOB_COMPLETION_INDEX": index])
            #expect(
                bad.status == 64 && bad.stderr.contains("JOB_COMPLETION_INDEX=\(index) is not an index from 0 to 3"),
                "\(bad.stderr)")
        }
    }

    @Test("serve --port -1 and prune --older-than past a century say their ranges")
    func otherOptions() throws {
        let port = try fpctl("serve", Paths.sample("demo"), "--port", "-1")
        #expect(port.status == 64 && port.stderr.contains("--port -1: use 0 to 65535"), "\(port.stderr)")
        let tmp = try TemporaryDirectory()
        let prune = try fpctl("cache", "prune", "--cache-dir", tmp.path, "--older-than", "99999999w")
        #expect(
            prune.status == 64 && prune.stderr.contains("--older-than 99999999w: use 0s to 36500d"), "\(prune.stderr)")
    }

    @Test("serve --host ::1 prints a URL warm and resolve take, the address in brackets")
    func ipv6URL() throws {
        let server = try ServeProcess([Paths.sample("demo"), "--host", "::1", "-q"])
        #expect(server.url.hasPrefix("http://[::1]:"), "\(server.url)")
        let tmp = try TemporaryDirectory()
        let resolve = try fpctl(
            "resolve", "paywall", "--api-url", server.url, "--app-id", "demo", "--user-id", "u-1",
            "--cache-dir", tmp.file("cache"))
        #expect(resolve.status == 0, "\(resolve.stderr)")
    }
}
