import FlowPilotCore
import Foundation
import Synchronization
import Testing

@testable import FlowPilotCore

/// `fpctl warm` against a real `fpctl serve`, counting the requests it really made.
@Suite("fpctl warm, resolve and ready against fpctl serve")
struct WarmTests {
    /// A resolve time limit no test waits out: where a test is about sharing or
    /// answering, not timing out, a loaded run must not make it one. Under a
    /// full `swift test` on two cores, blocking tests can hold the cooperative
    /// pool for minutes; a 60 s limit once failed "task-free prefetch" so
    /// (its answer came, but the task that lands it did not run in time).
    /// Timing out has tests of its own, with short limits.
    static let patience: Duration = .seconds(3600)

    let tmp: TemporaryDirectory
    var cache: String { tmp.file("cache") }

    init() throws { tmp = try TemporaryDirectory() }

    /// `now`, when given, is the time the run takes as now (`FPCTL_NOW`).
    func warm(_ server: ServeProcess?, _ args: [String], url: String? = nil, now: String? = nil) throws
        -> ProcessResult
    {
        try fpctl(
            ["warm"] + args + [
                "--cache-dir", cache, "--api-url", url ?? server!.url, "--app-id", "demo", "--format", "json",
            ], environment: now.map { ["FPCTL_NOW": $0] } ?? [:])
    }

    func rows(_ r: ProcessResult) -> [[String: Any]] {
        ((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any])?["rows"] as? [[String: Any]]
            ?? []
    }

    func stats(_ server: ServeProcess) async throws -> (routes: [String: Int], keys: [String: Int]) {
        let s = try await http(.GET, "\(server.url)/_admin/stats").json ?? [:]
        return (s["routes"] as? [String: Int] ?? [:], s["keys"] as? [String: Int] ?? [:])
    }

    @Test("two placements for one identity make one batch request; duplicates cost nothing")
    func oneBatch() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let r = try warm(server, ["onboarding", "paywall", "paywall", "--user-id", "alice", "--media", "none"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(rows(r).count == 2)
        let (routes, keys) = try await stats(server)
        #expect(routes["resolve-batch"] == 1 && routes["resolve"] == nil)
        #expect(keys == ["demo/onboarding/alice": 1, "demo/paywall/alice": 1])
    }

    @Test("without a batch endpoint: one request per placement, and the batch is not retried for later identities")
    func batchFallback() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls", "--no-batch"])
        let ids = tmp.file("ids.jsonl")
        try #"{"user_id":"a"}"#.appending("\n" + #"{"user_id":"b"}"# + "\n" + #"{"user_id":"a"}"# + "\n").write(
            toFile: ids, atomically: true, encoding: .utf8)
        let r = try warm(
            server, ["onboarding", "paywall", "--identities", ids, "--media", "none", "--concurrency", "1"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(rows(r).count == 4)
        let (routes, _) = try await stats(server)
        #expect(routes["resolve-batch"] == 1)
        #expect(routes["resolve"] == 4)
    }

    @Test(
        "the chain: Tier 0 with no requests, Tier 1 after the TTL, Tier 2 with the server down, Tier 3 from the bundle, else failed"
    )
    func tiers() async throws {
        var server: ServeProcess? = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls", "--ttl", "1"])
        let url = server!.url
        // The TTL is 1 s: FPCTL_NOW moves the run's clock past it instead of waiting.
        let paywall = ["paywall", "--user-id", "u", "--media", "none"]
        let first = rows(try warm(server, paywall, now: "2026-11-01T10:00:00Z"))
        #expect(first.first?["delivery_source"] as? String == "network" && first.first?["from_cache"] as? Bool == false)
        let again = rows(try warm(server, paywall, now: "2026-11-01T10:00:00Z"))
        #expect(again.first?["delivery_source"] as? String == "cache" && again.first?["from_cache"] as? Bool == true)
        #expect(try await stats(server!).keys["demo/paywall/u"] == 1, "Tier 0 makes no request")
        let lapsed = rows(try warm(server, paywall, now: "2026-11-01T10:00:02Z"))
        #expect(lapsed.first?["delivery_source"] as? String == "network")
        server?.stop()
        server = nil
        let down = try warm(
            nil, paywall + ["--retries", "0"], url: url, now: "2026-11-01T10:00:04Z")
        #expect(
            rows(down).first?["delivery_source"] as? String == "stale_cache"
                && rows(down).first?["from_cache"] as? Bool == true)
        let otherIdentity = rows(
            try warm(nil, ["paywall", "--user-id", "someone-else", "--media", "none", "--retries", "0"], url: url))
        #expect(
            otherIdentity.first?["delivery_source"] as? String == "stale_cache",
            "the alias serves Tier 2 after an identity change")

        let bundle = try tmp.buildSample("demo")
        let emptyCache = tmp.file("empty")
        let bundled = try fpctl([
            "warm", "onboarding", "--cache-dir", emptyCache, "--api-url", url, "--app-id", "demo",
            "--bundle", bundle, "--retries", "0", "--format", "json", "--media", "none",
        ])
        #expect(
            rows(bundled).first?["delivery_source"] as? String == "bundled_default"
                && rows(bundled).first?["from_cache"] as? Bool == false)
        let nothing = try fpctl([
            "warm", "onboarding", "--cache-dir", tmp.file("empty2"), "--api-url", url, "--app-id", "demo",
            "--retries", "0", "--format", "json",
        ])
        #expect(nothing.status == 69)
        let failed = rows(nothing).first
        #expect(failed?["state"] as? String == "failed")
        #expect((failed?["error"] as? [String: Any])?["code"] as? String == "unreachable")
    }

    @Test("a server slower than the timeout: the outcome degrades, the late response lands, the next run hits Tier 0")
    func lateResolve() async throws {
        let server = try ServeProcess([
            Paths.sample("demo"), "-q", "--rewrite-asset-urls", "--ttl", "300", "--latency", "1200",
        ])
        let slow = try warm(
            server, ["paywall", "--user-id", "slow", "--timeout", "200ms", "--media", "none", "--grace", "10s"])
        #expect(slow.status == 3)
        #expect((rows(slow).first?["error"] as? [String: Any])?["code"] as? String == "timeout")
        #expect(slow.stderr.contains("1 late resolves landed"))
        let next = rows(try warm(server, ["paywall", "--user-id", "slow", "--timeout", "200ms", "--media", "none"]))
        #expect(next.first?["delivery_source"] as? String == "cache")
        #expect(try await stats(server).keys["demo/paywall/slow"] == 1)
    }

    @Test("changed attributes or user resolve fresh, never the other identity's fresh entry")
    func identityChange() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls", "--ttl", "300"])
        _ = try warm(server, ["paywall", "--user-id", "u", "--attribute", "plan=free", "--media", "none"])
        let changed = rows(
            try warm(server, ["paywall", "--user-id", "u", "--attribute", "plan=pro", "--media", "none"]))
        #expect(changed.first?["delivery_source"] as? String == "network")
        let other = rows(
            try warm(server, ["paywall", "--user-id", "v", "--attribute", "plan=free", "--media", "none"]))
        #expect(other.first?["delivery_source"] as? String == "network")
        #expect(try await stats(server).routes["resolve"] == 3)
    }

    @Test(
        "faults give the right outcome and cache nothing",
        arguments: [
            (#"{"fail_rate":1,"fail_status":503}"#, "http_503"),
            (#"{"fail_rate":1,"fail_status":429,"retry_after":1}"#, "http_429"),
            (#"{"truncate_body":true}"#, "invalid_response"),
            (#"{"invalid_json":true}"#, "invalid_response"),
            (#"{"close_connection":true}"#, "connection_error"),
            (#"{"invalid_flow":true}"#, "invalid_response"),
        ])
    func faults(fault: String, code: String) async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        #expect(try await http(.POST, "\(server.url)/_admin/faults", body: Data(fault.utf8)).status == 200)
        let r = try warm(
            server, ["paywall", "--user-id", "f", "--media", "none", "--retries", "1", "--timeout", "10s"])
        #expect(r.status == 3)
        #expect((rows(r).first?["error"] as? [String: Any])?["code"] as? String == code, "\(r.stdout)")
        #expect(
            try fpctl("cache", "list", "--cache-dir", cache, "--format", "csv").stdout.split(separator: "\n").count == 1
        )
        if code.hasPrefix("http_") { #expect(try await stats(server).keys["demo/paywall/f"] == 2, "one retry") }
    }

    @Test(
        "first-screen and all-screens warm exactly the first-screen and all-screen images; a broken image leaves the flow warmed"
    )
    func media() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let first = rows(try warm(server, ["onboarding", "--user-id", "m", "--media", "first-screen"]))
        #expect(first.first?["media_warmed"] as? Bool == true)
        #expect(try await stats(server).routes["media"] == 2 + 1, "welcome.png, logo.png and the font")
        let all = rows(try warm(server, ["onboarding", "--user-id", "m2", "--media", "all-screens"]))
        #expect(all.first?["media_warmed"] as? Bool == true)
        #expect(try await stats(server).routes["media"] == 3 + 2, "only the two images not cached yet")
        #expect(try await http(.POST, "\(server.url)/_admin/faults", json: ["fail_media": true]).status == 200)
        let broken = rows(try warm(server, ["paywall", "--user-id", "m3", "--media", "first-screen"]))
        #expect(broken.first?["state"] as? String == "warmed" && broken.first?["media_warmed"] as? Bool == false)
    }

    @Test(
        "identities start in input order (one at a time with --concurrency 1); a bad line ends the run only after every identity before it has its rows"
    )
    func inputOrderAndBadLine() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "150"])
        let good = (0..<6).map { #"{"user_id":"in-\#($0)"}"# }
        let ids = tmp.file("ids.jsonl")
        try (good + [#"{"user_id": 5"#, #"{"user_id":"after"}"#]).joined(separator: "\n").write(
            toFile: ids, atomically: true, encoding: .utf8)
        // Read ahead of the two in flight, the bad line is reached while the
        // first identities still wait for their answers.
        let r = try fpctl([
            "warm", "paywall", "onboarding", "--identities", ids, "--concurrency", "2", "--cache-dir", cache,
            "--api-url", server.url, "--app-id", "demo", "--media", "none", "--format", "csv",
        ])
        #expect(r.status == 65)
        #expect(r.stderr.contains("ids.jsonl:7:"), "\(r.stderr)")
        let users = r.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: " ").first.map(String.init) }
        #expect(users.count == 12, "both rows of each of the 6 identities before the bad line: \(r.stdout)")
        #expect(Set(users) == Set(good.indices.map { "in-\($0)" }), "none after it")
        #expect(!r.stdout.contains("failed"))

        let ordered = tmp.file("ordered.jsonl")
        try good.joined(separator: "\n").write(toFile: ordered, atomically: true, encoding: .utf8)
        let one = try fpctl([
            "warm", "paywall", "--identities", ordered, "--concurrency", "1", "--cache-dir", tmp.file("c1"),
            "--api-url", server.url, "--app-id", "demo", "--media", "none", "--format", "csv",
        ])
        #expect(one.status == 0)
        let order = one.stdout.split(separator: "\n").dropFirst().map {
            $0.split(separator: " ").first.map(String.init)
        }
        #expect(order == good.indices.map { "in-\($0)" }, "--concurrency 1 warms in input order")
    }

    @Test("a font shared by every identity's flow is looked for and downloaded once a run, and cached by its end")
    func fontOnce() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let ids = tmp.file("font-ids.jsonl")
        try (0..<40).map { #"{"user_id":"font-\#($0)"}"# }.joined(separator: "\n").write(
            toFile: ids, atomically: true, encoding: .utf8)
        let r = try warm(server, ["onboarding", "--identities", ids, "--media", "none", "--concurrency", "8"])
        #expect(r.status == 0)
        #expect(rows(r).count == 40)
        #expect(try await stats(server).routes["media"] == 1, "the onboarding flow's one font, once for 40 flows")
        let fonts = try FileManager.default.contentsOfDirectory(atPath: "\(cache)/fonts")
        #expect(fonts.count == 1, "\(fonts)")
    }

    @Test("--shard K/N splits identities stably: the shards cover every identity exactly once")
    func shards() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let ids = tmp.file("ids.jsonl")
        try (0..<20).map { #"{"user_id":"s\#($0)"}"# }.joined(separator: "\n").write(
            toFile: ids, atomically: true, encoding: .utf8)
        func users(_ shard: String) throws -> Set<String> {
            Set(
                rows(try warm(server, ["paywall", "--identities", ids, "--shard", shard, "--media", "none"])).compactMap
                { $0["user_id"] as? String })
        }
        let a = try users("1/2")
        let b = try users("2/2")
        #expect(a.isDisjoint(with: b))
        #expect(a.union(b).count == 20)
        #expect(try users("1/2") == a)
        #expect(
            try fpctl([
                "warm", "paywall", "--shard", "3/2", "--cache-dir", cache, "--api-url", server.url, "--app-id", "demo",
            ]).status == 64)
    }

    @Test("concurrent prefetches of one (placement, identity) share one request")
    func coalescing() async throws {
        // The flow lives a day: a caller that a starved machine starts only after the shared
        // request landed must find it fresh. With the default 300 s TTL one CI run's third caller,
        // started minutes late, found it stale and rightly asked again.
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "300", "--ttl", "86400"])
        let store = try CacheStore(root: cache, create: true)
        var config = WarmConfiguration()
        config.media = .none
        // Sharing is the point here, not timeouts: a loaded test machine must not turn a
        // 300 ms answer into a timed-out caller (it did once, with the default 4 s).
        config.resolveTimeout = Self.patience
        let warmer = Warmer(
            client: ResolveClient(baseURL: server.url, appID: "demo", apiKey: nil), store: store, bundle: nil,
            config: config)
        let identity = Identity(userID: "same")
        async let a = warmer.prefetch(["paywall"], for: identity)
        async let b = warmer.prefetch(["paywall"], for: identity)
        async let c = warmer.readiness("paywall", for: identity)
        let (ra, rb, rc) = await (a, b, c)
        let ready = if case .ready = rc { true } else { false }
        #expect(ra.first?.state == .warmed && rb.first?.state == .warmed && ready)
        #expect(try await stats(server).keys["demo/paywall/same"] == 1)
    }

    @Test(
        "a prefetch whose cache lookup missed a flow another caller's request then landed looks again, and asks the backend nothing",
        arguments: ["warm", "warm with images", "resolve"]
    )
    func coalescingAfterLanding(_ caller: String) async throws {
        // A day's TTL: the second caller, however late a starved machine resumes it, finds the flow fresh.
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--ttl", "86400"])
        let store = try CacheStore(root: cache, create: true)
        var config = WarmConfiguration()
        config.media = caller == "warm with images" ? .firstScreen : .none
        config.resolveTimeout = Self.patience
        let warmer = Warmer(
            client: ResolveClient(baseURL: server.url, appID: "demo", apiKey: nil), store: store, bundle: nil,
            config: config)
        let identity = Identity(userID: "between")
        // B looks the cache up and misses; held there, before it starts a request, while A's whole prefetch
        // asks, lands the flow and lets the key go. This is the interleaving a starved machine once made by
        // chance (two requests where one was due).
        let missed = DispatchSemaphore(value: 0)
        let landed = DispatchSemaphore(value: 0)
        let b = Pending<Warmer.Begun>()
        Thread.detachNewThread {
            b.fulfil(
                warmer.begin(["paywall"], for: identity, forResolve: caller == "resolve") {
                    missed.signal()
                    landed.wait()
                })
        }
        try await BlockingIO.run { missed.wait() }
        let a = await warmer.prefetch(["paywall"], for: identity)
        #expect(a.first?.state == .warmed && a.first?.deliverySource == .network)
        landed.signal()
        let begun = await b.value
        #expect(begun.needLive.isEmpty && begun.calls.isEmpty, "B started no request")
        let served = caller == "warm with images" ? begun.cachedWithImages.map(\.0) == [0] : begun.cached[0] != nil
        #expect(served && begun.cacheSteps.isEmpty, "B is served from the cache, fresh")
        #expect(try await stats(server).keys["demo/paywall/between"] == 1)
    }

    @Test(
        "the one prefetch engine through its callbacks answers as its async adapter does: warmed, timed out and late, shared; answered once, then finished once"
    )
    func enginePrefetch() async throws {
        // Every answer 2 s late: far past the hasty warmer's 500 ms even when a loaded machine is slow to
        // connect (at 400 ms and 100 ms, a connect slower than the timeout once made the row unreachable),
        // and long enough that a second prefetch always finds the first one's request still in flight.
        // Flows live a day: a step a starved machine resumes minutes late still finds its entry fresh.
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "2000", "--ttl", "86400"])
        let store = try CacheStore(root: cache, create: true)
        func warmer(timeout: Duration, store: CacheStore = store) -> Warmer {
            var config = WarmConfiguration()
            config.media = .none
            config.resolveTimeout = timeout
            return Warmer(
                client: ResolveClient(baseURL: server.url, appID: "demo", apiKey: nil), store: store, bundle: nil,
                config: config)
        }
        /// The callback path's events in order, and its outcomes to come. The
        /// resolve is started (or joined) before this returns.
        final class Events: Sendable {
            private let list = Mutex<[String]>([])
            func add(_ event: String) { list.withLock { $0.append(event) } }
            var all: [String] { list.withLock { $0 } }
        }
        func taskFree(_ warmer: Warmer, _ keys: [String], _ user: String) -> (
            events: Events, outcomes: Pending<[PrefetchOutcome]>
        ) {
            let events = Events()
            let outcomes = Pending<[PrefetchOutcome]>()
            warmer.prefetch(
                keys, for: Identity(userID: user), answered: { events.add("answered") },
                finished: { result in
                    events.add("finished")
                    outcomes.fulfil(result)
                })
            return (events, outcomes)
        }
        let patient = warmer(timeout: Self.patience)
        let first = taskFree(patient, ["paywall", "onboarding", "paywall"], "tf")
        let warmed = await first.outcomes.value
        let expected = await patient.prefetch(["paywall", "onboarding", "paywall"], for: Identity(userID: "tf2"))
        #expect(first.events.all == ["answered", "finished"])
        #expect(warmed.map(\.placement) == ["paywall", "onboarding"] && warmed.allSatisfy { $0.state == .warmed })
        #expect(warmed.map(\.placement) == expected.map(\.placement) && expected.allSatisfy { $0.state == .warmed })
        // A fresh entry now: Tier 0 at once, with no request and no wait.
        let hit = await taskFree(patient, ["paywall"], "tf").outcomes.value
        #expect(hit.first?.deliverySource == .cache)
        // Slower than the timeout: failed with a timeout, the resolve left running and landing in the
        // grace. A cache of its own: this one's placement aliases would serve a stale copy (Tier 2).
        let hasty = warmer(timeout: .milliseconds(500), store: try CacheStore(root: tmp.file("hasty"), create: true))
        let slow = taskFree(hasty, ["paywall", "onboarding"], "slow")
        let late = await slow.outcomes.value
        #expect(late.allSatisfy { $0.state == .failed && $0.errorCode == "timeout" })
        let landed = await hasty.waitForLateResolves(grace: Self.patience)
        #expect(landed.landed == 2 && landed.pending == 0)
        // The answers and commits that came after the deadline told the prefetch nothing more.
        #expect(slow.events.all == ["answered", "finished"])
        // Joined: a prefetch of an identity whose resolve the callback one started shares its request.
        let shared = taskFree(patient, ["paywall"], "shared")
        let joined = await patient.prefetch(["paywall"], for: Identity(userID: "shared"))
        let sharedOutcomes = await shared.outcomes.value
        #expect(joined.first?.state == .warmed && sharedOutcomes.first?.state == .warmed)
        #expect(try await stats(server).keys["demo/paywall/shared"] == 1)
    }

    @Test(
        "resolve and readiness of a fresh cache hit with a configuration that warms images: Tier 0, nothing downloaded"
    )
    func resolveFreshHitWithMediaConfigured() async throws {
        // A day's TTL: the hit must stay fresh however late a starved machine resumes the test.
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--ttl", "86400"])
        let store = try CacheStore(root: cache, create: true)
        func warmer(_ media: MediaStrategy) -> Warmer {
            var config = WarmConfiguration()
            (config.media, config.resolveTimeout) = (media, Self.patience)
            return Warmer(
                client: ResolveClient(baseURL: server.url, appID: "demo", apiKey: nil), store: store, bundle: nil,
                config: config)
        }
        let identity = Identity(userID: "fresh-hit")
        #expect(await warmer(.none).prefetch(["paywall"], for: identity).map(\.state) == [.warmed])
        // The default configuration warms the first screen's images; resolve and ready never do.
        let configured = warmer(.firstScreen)
        let resolution = await configured.resolve("paywall", for: identity)
        #expect(resolution.steps.count == 1 && resolution.steps.first?.tier == 0)
        #expect(resolution.outcome.deliverySource == .cache && !resolution.outcome.mediaWarmed)
        let ready = if case .ready = await configured.readiness("paywall", for: identity) { true } else { false }
        #expect(ready)
        #expect(configured.imagePhasesRunning == 0)
    }

    @Test(
        "a stop reaches every identity's image phase: those running and any started after it end at once, cancelled",
        .timeLimit(.minutes(10)))
    func stopReachesImagePhases() async throws {
        var config = WarmConfiguration()
        config.media = .allScreens
        let warmer = Warmer(
            client: ResolveClient(baseURL: "http://127.0.0.1:9", appID: "demo", apiKey: nil),
            store: try CacheStore(root: cache, create: true), bundle: nil, config: config)
        // Phases that wait a day for images that never come, as a trickling server's would: only a stop ends
        // them (a phase that the stop did not reach would hold this test to its time limit, and fail it).
        func phase(_ ended: Pending<Bool>) {
            warmer.imagePhase {
                _ = await Pending<Bool>().value(within: .seconds(86_400))
                ended.fulfil(Task.isCancelled)
            }
        }
        let running = (0..<2).map { _ in Pending<Bool>() }
        running.forEach(phase)
        #expect(warmer.imagePhasesRunning == 2, "registered as they start")
        warmer.finishStopped()
        for ended in running { #expect(await ended.value, "ended by the stop's cancellation") }
        let late = Pending<Bool>()
        phase(late)
        #expect(await late.value, "a phase started after the stop is cancelled at once")
        #expect(warmer.imagePhasesRunning == 0)
    }

    @Test("resolve explains the chain; ready answers 0 or 1")
    func resolveAndReady() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls", "--ttl", "300"])
        let base = ["--cache-dir", cache, "--api-url", server.url, "--app-id", "demo", "--user-id", "r"]
        let out = tmp.file("flow.json")
        let r = try fpctl(["resolve", "paywall", "--output", out] + base)
        #expect(r.status == 0)
        #expect(r.stdout.contains("tier 0 cache: no entry") && r.stdout.contains("tier 1 live resolve: ok"))
        #expect(
            FlowDocument.validate(data: try Data(contentsOf: URL(fileURLWithPath: out)), location: "out").0?.id
                == "flow_paywall")
        // The output exists now: replaced only with --overwrite, and refused before anything is resolved.
        try Data("mine".utf8).write(to: URL(fileURLWithPath: out))
        let again = try fpctl(["resolve", "paywall", "--output", out] + base)
        #expect(again.status == 73 && again.stdout.isEmpty, "\(again.stderr)")
        #expect(again.stderr == "fpctl: error: \(out): already exists (use --overwrite to replace it)\n")
        #expect(FileManager.default.contents(atPath: out) == Data("mine".utf8))
        #expect(try fpctl(["resolve", "paywall", "--output", out, "--overwrite"] + base).status == 0)
        #expect(FileManager.default.contents(atPath: out) != Data("mine".utf8))
        #expect(try fpctl(["ready", "paywall"] + base).status == 0)
        #expect(try fpctl(["ready", "nope"] + base).status == 1)
    }
}
