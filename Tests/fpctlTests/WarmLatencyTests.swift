import FlowPilotCore
import Foundation
import Testing

/// Warm against a backend that takes its time, as a production one 100 ms
/// away does: `fpctl serve --latency` counts the requests it is answering at
/// once, so the test sees what `--concurrency` really puts in flight.
@Suite("warm against a slow backend: requests in flight, the rate limit")
struct WarmLatencyTests {
    let tmp: TemporaryDirectory

    init() throws { tmp = try TemporaryDirectory() }

    func identities(_ count: Int) throws -> String { try tmp.identities(count) }

    func stats(_ server: ServeProcess) async throws -> [String: Any] {
        try #require(try await http(.GET, server.url + "/_admin/stats").json)
    }

    /// `warm onboarding paywall --concurrency 64` over `count` identities against
    /// `fpctl serve` with `serving`; every pair warmed; the server's stats after.
    func warmAt64(identities count: Int, serving: [String]) async throws -> [String: Any] {
        let server = try ServeProcess([Paths.sample("demo"), "-q"] + serving)
        let result = try fpctl(
            "warm", "onboarding", "paywall", "--api-url", server.url, "--app-id", "demo", "--media", "none",
            "--identities", try identities(count), "--cache-dir", tmp.file("c"), "--concurrency", "64", "--summary",
            "--format", "csv")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("TOTAL,\(2 * count),\(2 * count)"), "\(result.stdout)")
        return try await stats(server)
    }

    @Test("--concurrency 64 against a 200 ms backend: the server sees at least 60 batch requests at once")
    func concurrencyHolds() async throws {
        let stats = try await warmAt64(identities: 192, serving: ["--latency", "200"])
        let peak = try #require(stats["peak_in_flight"] as? Int)
        #expect(peak >= 60, "peak in flight \(peak)")
        #expect(peak <= 64, "more requests than --concurrency: \(peak)")
        #expect((stats["routes"] as? [String: Int])?["resolve-batch"] == 192)
    }

    @Test(
        "a backend with no batch endpoint: --concurrency 64 over 2 placements puts 128 resolves in flight, not 72 (the old budget)"
    )
    func concurrencyWithoutBatches() async throws {
        // 1 s a request: time enough to open 128 connections even on a loaded machine.
        let stats = try await warmAt64(identities: 128, serving: ["--latency", "1000", "--no-batch"])
        let peak = try #require(stats["peak_in_flight"] as? Int)
        // Before, the connections were --concurrency + --media-concurrency (72) whatever the batch fallback
        // did, so no more than 72 could be in flight.
        #expect(peak > 100, "peak in flight \(peak)")
        #expect(peak <= 128, "more requests than 64 identities' placements: \(peak)")
        #expect((stats["routes"] as? [String: Int])?["resolve"] == 256)
    }

    @Test("--rate 3000/m: 100 identities' batches take at least 99 slots of 20 ms, and the summary names the limit")
    func rateLimit() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let metrics = tmp.file("warm.prom")
        let started = ContinuousClock.now
        let result = try fpctl(
            "warm", "onboarding", "paywall", "--api-url", server.url, "--app-id", "demo", "--media", "none",
            "--identities", try identities(100), "--cache-dir", tmp.file("c"), "--concurrency", "32", "--rate",
            "3000/m", "--summary", "--format", "csv", "--metrics-file", metrics)
        let elapsed = ContinuousClock.now - started
        #expect(result.status == 0, "\(result.stderr)")
        #expect(elapsed >= .milliseconds(1980), "100 requests at 50/s took \(elapsed)")
        #expect(result.stderr.contains("; rate limit 3000/m, requests waited "), "\(result.stderr)")
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("fpctl_warm_rate_limit_requests_per_second 50"), "\(text)")
        #expect(text.contains("fpctl_warm_rate_wait_seconds "))
        #expect((try await stats(server)["routes"] as? [String: Int])?["resolve-batch"] == 100)
    }

    @Test("--rate 0, abc, -5 and 5/h are usage errors (64) that name the option")
    func rateRefused() throws {
        for rate in ["0", "abc", "-5", "5/h", ""] {
            let result = try fpctl(
                "warm", "paywall", "--user-id", "u", "--api-url", "http://127.0.0.1:9", "--app-id", "demo",
                "--cache-dir", tmp.file("c"), "--rate=\(rate)")
            #expect(result.status == 64, "--rate \(rate): \(result.stderr)")
            #expect(result.stderr.contains("'--rate <rate>'"), "\(result.stderr)")
        }
    }

    @Test("a 429 with Retry-After 5 holds back every request of the client, not only the one that got it")
    func retryAfterPausesAll() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let faults = try await http(
            .POST, server.url + "/_admin/faults",
            // 5 s, of which the test asks for 1.9: a loaded machine may take seconds to hand back the 429.
            json: ["fail_rate": 1, "fail_status": 429, "retry_after": 5, "placements": ["paywall"]])
        #expect(faults.status == 200, "\(faults.text)")
        let client = ResolveClient(baseURL: server.url, appID: "demo", apiKey: nil, retries: 0)
        let identity = Identity(userID: "u1", attributes: [:])
        let refused = await client.resolve("paywall", identity)
        guard case .failed(.http(status: 429)) = refused else {
            Issue.record("paywall was not refused with 429: \(refused)")
            return
        }
        let started = ContinuousClock.now
        let other = await client.resolve("onboarding", identity)
        let waited = ContinuousClock.now - started
        guard case .flow = other else {
            Issue.record("onboarding did not resolve: \(other)")
            return
        }
        #expect(waited >= .milliseconds(1900), "the next request went after \(waited)")
        #expect(client.pacer.waited >= .milliseconds(1900))
    }
}
