import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import FlowPilotCore

private let flowJSON = #"{"schema_version":1,"id":"f","version":"v1","screens":[{"id":"a","components":[]}]}"#
private let document = FlowDocument.validate(data: Data(flowJSON.utf8), location: "f").0

private func cached(age: TimeInterval, ttl: Int, now: Date) throws -> (CachedFlow, FlowDocument) {
    let doc = try #require(document)
    let flow = CachedFlow(
        placement: "p", fingerprint: String(repeating: "a", count: 64), userID: "u", flowID: "f",
        version: "v1", resolvedAt: now.addingTimeInterval(-age), ttlSeconds: ttl, size: 1, path: "/x")
    return (flow, doc)
}

@Suite("the resolution chain as plain decisions")
struct TierChainTests {
    let now = Date(timeIntervalSince1970: 2_000_000_000)

    @Test("Tier 0 serves a fresh entry and only a fresh one")
    func tierZero() throws {
        let (step, decision) = TierChain.cached(try cached(age: 10, ttl: 300, now: now), now: now)
        #expect(step == .freshHit(ageSeconds: 10, ttlSeconds: 300))
        guard case .serve(let served)? = decision else {
            Issue.record("no decision")
            return
        }
        #expect(served.tier == .cache && served.ttlSeconds == 300)

        let (staleStep, staleDecision) = TierChain.cached(try cached(age: 300, ttl: 300, now: now), now: now)
        #expect(
            staleStep == .staleEntry(ageSeconds: 300, ttlSeconds: 300) && staleDecision == nil,
            "now - resolved_at < ttl is fresh; equal is not")
        #expect(TierChain.cached(nil, now: now).0 == .noEntry)
    }

    @Test(
        "a live flow wins Tier 1 with its TTL, or the environment's when the backend sends none; stale and bundle are not even asked"
    )
    func tierOne() throws {
        let doc = try #require(document)
        let (steps, decision) = TierChain.afterLive(
            .success(.flow(doc, ttlSeconds: nil)), defaultTTL: 60,
            stale: {
                Issue.record("Tier 2 looked up after a live flow")
                return nil
            },
            bundled: {
                Issue.record("Tier 3 looked up after a live flow")
                return nil
            }, bundleGiven: true)
        #expect(steps == [.liveFlow(ttlSeconds: 60)])
        guard case .serve(let served) = decision else {
            Issue.record("not served")
            return
        }
        #expect(served.tier == .network && served.ttlSeconds == 60)
    }

    @Test("no flow from the backend is noFlow, not a fallback")
    func noFlow() {
        let (steps, decision) = TierChain.afterLive(
            .success(.noFlow), defaultTTL: 300, stale: { nil }, bundled: { document },
            bundleGiven: true)
        #expect(steps == [.liveNoFlow])
        guard case .noFlow = decision else {
            Issue.record("expected noFlow")
            return
        }
    }

    @Test(
        "a failed or timed-out live resolve falls to the stale copy, then the bundle, then fails with the live failure")
    func fallbacks() throws {
        let stale = try cached(age: 9999, ttl: 60, now: now)
        let failures: [Result<LiveResult, ResolveFailure>] = [
            .success(.failed(.http(status: 503))), .failure(.timeout("late")),
        ]
        for live in failures {
            let reason: ResolveFailure = if case .failure(let r) = live { r } else { .http(status: 503) }
            let (s2, d2) = TierChain.afterLive(
                live, defaultTTL: 300, stale: { stale }, bundled: { document }, bundleGiven: true)
            #expect(s2 == [.liveFailed(reason), .staleServed])
            if case .serve(let served) = d2 {
                #expect(served.tier == .staleCache && served.ttlSeconds == 60)
            } else {
                Issue.record("no Tier 2")
            }

            let (s3, d3) = TierChain.afterLive(
                live, defaultTTL: 300, stale: { nil }, bundled: { document }, bundleGiven: true)
            #expect(s3 == [.liveFailed(reason), .staleMissing, .bundledServed])
            if case .serve(let served) = d3 {
                #expect(served.tier == .bundledDefault && served.ttlSeconds == nil)
            } else {
                Issue.record("no Tier 3")
            }

            let (s4, d4) = TierChain.afterLive(
                live, defaultTTL: 300, stale: { nil }, bundled: { nil }, bundleGiven: false)
            #expect(s4 == [.liveFailed(reason), .staleMissing, .bundledMissing(bundleGiven: false)])
            if case .fail(let failure) = d4 { #expect(failure == reason) } else { Issue.record("expected a failure") }
        }
    }

    @Test("from_cache is true for the local copies only")
    func fromCache() {
        #expect(Tier.allCases.filter(\.isLocalCopy) == [.cache, .staleCache])
        #expect(Tier.allCases.map(\.rawValue) == ["cache", "network", "stale_cache", "bundled_default"])
    }
}

@Suite("shared in-flight work, shards, identities and the run's exit status")
struct WarmRunPartsTests {
    @Test("callers of a running key share its task; the key is started again once it finished")
    func inflightPool() async {
        let pool = InflightPool<String, Int>()
        let started = Counter()
        let gate = Gate()
        func start(_ keys: [String]) -> [String: @Sendable () async -> Int] {
            Dictionary(
                uniqueKeysWithValues: keys.map { key in
                    let work: @Sendable () async -> Int = {
                        started.increment()
                        await gate.wait()
                        return key.count
                    }
                    return (key, work)
                })
        }
        let first = pool.tasks(for: ["ab", "c"], start: start)
        let second = pool.tasks(
            for: ["ab", "xyz"],
            start: { keys in
                #expect(keys == ["xyz"], "only the key not running starts")
                return start(keys)
            })
        #expect(first["ab"] == second["ab"])
        gate.open()
        let ab = await first["ab"]?.value
        let xyz = await second["xyz"]?.value
        let c = await first["c"]?.value
        #expect(ab == 2 && xyz == 3 && c == 1)
        #expect(started.value == 3)
        while pool.count > 0 { await Task.yield() }
        let third = pool.tasks(for: ["ab"], start: start)
        #expect(third["ab"] != first["ab"], "a finished key is forgotten")
        let again = await third["ab"]?.value
        #expect(again == 2 && started.value == 4)
    }

    @Test("the limiter never lets more than its limit run at once")
    func limiter() async {
        let limiter = AsyncLimiter(limit: 3)
        let running = Counter()
        let peak = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    await limiter.run {
                        peak.max(running.increment())
                        try? await Task.sleep(for: .milliseconds(5))
                        running.decrement()
                    }
                }
            }
        }
        #expect(peak.value == 3)
    }

    @Test("shards parse K/N only, and split fingerprints into disjoint sets that cover them all")
    func shards() throws {
        for bad in ["0/2", "3/2", "1/0", "1", "a/b", "1/2/3", "/2", "-1/2"] { #expect(Shard(bad) == nil, "\(bad)") }
        let shards = try (1...3).map { try #require(Shard("\($0)/3")) }
        let fingerprints = (0..<300).map { Identity(userID: "u\($0)").fingerprint }
        for fingerprint in fingerprints { #expect(shards.filter { $0.contains(fingerprint: fingerprint) }.count == 1) }
        #expect(shards.allSatisfy { shard in fingerprints.contains { shard.contains(fingerprint: $0) } })
    }

    @Test("identities stream from JSON Lines: blank lines, CRLF and a last line without newline; errors name the line")
    func identityLines() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fpctl-ids-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let good = "\(dir)/good.jsonl"
        try "{\"user_id\":\"a\",\"attributes\":{\"plan\":\"pro\"}}\r\n\n  \n{\"user_id\":\"b\"}".write(
            toFile: good, atomically: true, encoding: .utf8)
        var users: [Identity] = []
        for try await identity in try IdentityLines(path: good) { users.append(identity) }
        #expect(users == [Identity(userID: "a", attributes: ["plan": .string("pro")]), Identity(userID: "b")])

        let big = "\(dir)/big.jsonl"
        try (0..<5000).map { "{\"user_id\":\"user-\($0)\"}" }.joined(separator: "\n").write(
            toFile: big, atomically: true, encoding: .utf8)
        var count = 0
        for try await _ in try IdentityLines(path: big) { count += 1 }
        #expect(count == 5000, "lines across 64 KiB chunk boundaries")

        let bad = "\(dir)/bad.jsonl"
        try "{\"user_id\":\"a\"}\n{\"user\":1}\n".write(toFile: bad, atomically: true, encoding: .utf8)
        await #expect(throws: FPError.self) {
            for try await _ in try IdentityLines(path: bad) {}
        }
        do {
            for try await _ in try IdentityLines(path: bad) {}
        } catch let FPError.invalid(findings) {
            #expect(findings.map(\.line) == ["identity: \(bad):2: each line needs a string user_id"])
        }
        #expect(throws: FPError.self) { try IdentityLines(path: "\(dir)/missing.jsonl") }
    }

    @Test("the run's verdict: unavailable when nothing reached the backend, partial per --fail-on, else complete")
    func verdict() {
        func summary(warmed: Int = 0, noFlow: Int = 0, failed: Int = 0, requests: Int = 1, unavailable: Int = 0)
            -> WarmRun.Summary
        {
            var counts = WarmRun.Counts()
            (counts.warmed, counts.noFlow, counts.failed) = (warmed, noFlow, failed)
            return WarmRun.Summary(
                counts: counts, requests: requests, unavailable: unavailable, lateLanded: 0, latePending: 0,
                elapsed: .zero)
        }
        #expect(summary(failed: 2, requests: 2, unavailable: 2).verdict(failOn: .never) == .unavailable)
        #expect(
            summary(warmed: 1, failed: 1, requests: 2, unavailable: 2).verdict(failOn: .failed) == .partial,
            "a flow served from a fallback tier is not 'unavailable'")
        #expect(summary(warmed: 1, failed: 1).verdict(failOn: .failed) == .partial)
        #expect(summary(warmed: 1, noFlow: 1).verdict(failOn: .failed) == .complete)
        #expect(summary(warmed: 1, noFlow: 1).verdict(failOn: .noFlow) == .partial)
        #expect(summary(failed: 1).verdict(failOn: .never) == .complete)
        #expect(summary(warmed: 1, requests: 0).verdict(failOn: .failed) == .complete)
    }
}

@Suite("transport errors are classified by type")
struct ResolveFailureTests {
    @Test("AsyncHTTPClient's and NIO's error types map to stable codes")
    func byType() {
        #expect(ResolveFailure.transport(HTTPClientError.connectTimeout).code == "unreachable")
        #expect(ResolveFailure.transport(HTTPClientError.deadlineExceeded).code == "timeout")
        #expect(ResolveFailure.transport(HTTPClientError.readTimeout).code == "timeout")
        #expect(ResolveFailure.transport(HTTPClientError.remoteConnectionClosed).code == "connection_error")
        #expect(ResolveFailure.transport(IOError(errnoCode: ECONNREFUSED, reason: "connect")).code == "unreachable")
        #expect(ResolveFailure.transport(IOError(errnoCode: ECONNRESET, reason: "read")).code == "connection_error")
        #expect(ResolveFailure.transport(ChannelError.connectTimeout(.seconds(1))).code == "unreachable")
        #expect(ResolveFailure.transport(NIOTooManyBytesError(maxBytes: 16)).code == "invalid_response")
        struct Unknown: Error, CustomStringConvertible { var description: String { "connect refused timeout" } }
        #expect(ResolveFailure.transport(Unknown()).code == "connection_error", "words in a description decide nothing")
    }

    @Test("a refused port is unreachable, through the real client")
    func refusedPort() async throws {
        // Bind a port, then close it: nothing listens there now.
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(
            host: "127.0.0.1", port: 0
        ).get()
        let port = try #require(channel.localAddress?.port)
        try await channel.close()
        let client = ResolveClient(baseURL: "http://127.0.0.1:\(port)", appID: "demo", apiKey: nil, retries: 0)
        guard case .failed(let failure) = await client.resolve("paywall", Identity(userID: "u")) else {
            Issue.record("a refused port resolved")
            return
        }
        #expect(failure.code == "unreachable" && failure.isUnavailable, "\(failure)")
    }
}

/// A thread-safe counter for tests.
final class Counter: Sendable {
    private let state = Mutex(0)
    var value: Int { state.withLock { $0 } }

    @discardableResult func increment() -> Int {
        state.withLock { value in
            value += 1
            return value
        }
    }

    func decrement() { state.withLock { $0 -= 1 } }
    func max(_ candidate: Int) { state.withLock { $0 = Swift.max($0, candidate) } }
}

/// Holds tasks until opened.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

@Suite("what keeps a warm near the disk's write floor")
struct WarmSpeedPartsTests {
    final class Scratch {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fpctl-speed-\(UUID().uuidString)")
            .path
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    @Test("aliases: the first entry of a placement at once, later ones coalesced, flush points at the newest")
    func aliasWriter() throws {
        let scratch = Scratch()
        let store = try CacheStore(root: scratch.path, create: true)
        let doc = try #require(document)
        let writer = AliasWriter(store: store, interval: .seconds(3600))
        let start = Date(timeIntervalSince1970: 2_000_000_000)
        func put(_ user: String, _ offset: TimeInterval) throws {
            let entry = try store.storeFlow(
                placement: "p", identity: Identity(userID: user), document: doc, ttlSeconds: 60, tier: .network,
                resolvedAt: start.addingTimeInterval(offset), pointAlias: false)
            writer.stored(entry)
        }
        try put("first", 0)
        #expect(store.lookupAlias(placement: "p")?.0.userID == "first", "the first entry gets its alias at once")
        try put("second", 1)
        try put("third", 2)
        #expect(store.lookupAlias(placement: "p")?.0.userID == "first", "later ones wait for the interval or a flush")
        writer.flush()
        #expect(store.lookupAlias(placement: "p")?.0.userID == "third", "flush points at the newest")
        #expect(try store.verify(repair: false).isEmpty)
    }

    @Test("a flow equal to one validated before is reused; a different flow under the same hash is validated")
    func flowMemo() throws {
        let memo = FlowMemo()
        let base: JSONValue = .object([
            "schema_version": .number(1), "id": .string("f"), "version": .string("v"),
            "screens": .array([.object(["id": .string("a"), "components": .array([])])]),
        ])
        guard case .object(var members) = base else { return }
        members["content_hash"] = .string(FlowDocument.computeContentHash(base))
        let valid = JSONValue.object(members)
        let (first, _) = memo.validate(valid, location: "a")
        let (again, findings) = memo.validate(valid, location: "b")
        #expect(first != nil && again != nil && findings.isEmpty)
        #expect(first?.encoded === again?.encoded, "the same document, encoded once")
        members["id"] = .string("changed")  // the declared hash no longer matches
        let (tampered, problems) = memo.validate(.object(members), location: "c")
        #expect(tampered == nil && problems.contains { $0.rule == "flow-content-hash" })
    }

    @Test("an identity's fingerprint is computed once and is what equality means")
    func identityFingerprint() {
        let a = Identity(userID: "u", attributes: ["plan": .string("pro"), "n": .number(1)])
        let b = Identity(userID: "u", attributes: ["n": .number(1), "plan": .string("pro")])
        #expect(a == b && a.fingerprint == b.fingerprint && a.fingerprint.count == 64)
        #expect(a != Identity(userID: "u", attributes: ["plan": .string("free")]))
    }
}
