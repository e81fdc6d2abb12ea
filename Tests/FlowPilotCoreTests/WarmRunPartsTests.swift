import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import FlowPilotCore

@Suite("shared in-flight work, shards, identities and the run's verdict")
struct WarmRunPartsTests {
    @Test(
        "callers of a running key share its value and its tag; keys claimed together run once; a delivered key restarts"
    )
    func inflightPool() async {
        let pool = InflightPool<String, Int, String>()
        let gate = Gate()
        // One piece of work for every claim it is given, as one batch request is.
        func work(_ claims: [InflightPool<String, Int, String>.Claim]) {
            Task {
                await gate.wait()
                for claim in claims {
                    pool.fulfil(claim, claim.key.count)
                    pool.release(claim)
                }
            }
        }
        let first = pool.values(for: [("ab", "first"), ("c", "first"), ("ab", "first")])
        let second = pool.values(for: [("ab", "second"), ("xyz", "second")])
        let (one, two) = (first.running.compactMap { $0 }, second.running.compactMap { $0 })
        #expect(one.count == 3 && two.count == 2, "a value for each key given, in order")
        #expect(one[0].value === one[2].value, "a key given twice counts once")
        #expect(one[0].value === two[0].value)
        #expect(two[0].tag == "first", "a joined key has its claimer's tag")
        #expect(first.claims.map(\.key) == ["ab", "c"] && second.claims.map(\.key) == ["xyz"])
        #expect(pool.count == 3)
        work(first.claims)
        work(second.claims)
        gate.open()
        let ab = await one[0].value.value
        let xyz = await two[1].value.value
        let c = await one[1].value.value
        #expect(ab == 2 && xyz == 3 && c == 1)
        #expect(pool.count == 0, "a delivered key is forgotten")
        let third = pool.values(for: [("ab", "third")])
        #expect(third.running[0]?.value !== one[0].value)
        #expect(third.claims.map(\.tag) == ["third"], "a delivered key is claimed again")
        work(third.claims)
        #expect(await third.running[0]?.value.value == 2)
    }

    @Test(
        "a caller whose look for a key's effect came before the key's release is told to look again, not given a claim; one whose look came after claims it"
    )
    func inflightPoolEpoch() async {
        typealias Pool = InflightPool<String, Int, String>
        let pool = Pool()
        // Caller B looks for "k"'s effect (missing), having read the epoch first; meanwhile A claims, runs and
        // releases "k". B must not start "k" again: its look is older than the release.
        let before = pool.epoch
        let a = pool.values(for: [("k", "a")], since: before)
        #expect(a.claims.map(\.key) == ["k"], "nothing released since: a claim")
        pool.fulfil(a.claims[0], 1)
        pool.release(a.claims[0])
        #expect(pool.epoch > before)
        let late = pool.values(for: [("other", "b"), ("k", "b")], since: before)
        #expect(late.running[1] == nil, "k: look again")
        #expect(
            late.claims.isEmpty && late.running[0] == nil && pool.count == 0,
            "nothing claimed: keys asked together are not split by a recheck (one batch request)")
        // B looked again after reading the epoch anew: now it may claim.
        let again = pool.values(for: [("k", "b")], since: pool.epoch)
        #expect(again.claims.map(\.key) == ["k"] && again.running[0] != nil)
        // Without an epoch (a caller that looked nowhere first), a released key is simply claimed.
        pool.release(again.claims[0])
        #expect(pool.values(for: [("k", "c")]).claims.map(\.tag) == ["c"])
        // A release only looks back over its own place: after a run of other keys' releases, exactly the keys
        // sharing a place with one of them are told to look again.
        let mark = pool.epoch
        var marked = Set<Int>()
        for n in 0..<8 {
            let other = pool.values(for: [("x\(n)", "x")])
            pool.release(other.claims[0])
            marked.insert(Pool.slot("x\(n)"))
        }
        for n in 0..<64 {
            let key = "y\(n)"
            let got = pool.values(for: [(key, "y")], since: mark)
            #expect(got.claims.isEmpty == marked.contains(Pool.slot(key)), "\(key)")
        }
    }

    @Test("a waiter with a limit gets nil once it passes, never before; the work still lands for later waiters")
    func pendingLimits() async throws {
        let gate = Gate()
        let pending = Pending<Int>.run {
            await gate.wait()
            return 7
        }
        let started = ContinuousClock.now
        async let early = pending.value(within: .milliseconds(40))
        // A day: longer than CI lets any run last (90 minutes), so this limit cannot pass
        // before the gate opens however starved the machine is (60 s once did, on a loaded CI run).
        async let patient = pending.value(within: .seconds(86_400))
        #expect(await early == nil)
        #expect(ContinuousClock.now - started >= .milliseconds(40), "a limit never fires early")
        #expect(await pending.value(within: .zero) == nil, "not given yet")
        gate.open()
        #expect(await patient == 7, "a waiter whose limit has not passed gets the value")
        #expect(await pending.value == 7)
        #expect(await pending.value(within: .zero) == 7, "later waiters get it at once")
        let late = Pending<Int>()
        #expect(await late.value(within: .zero) == nil, "a limit of zero is a look, not a wait")
    }

    @Test("the mailbox hands every event once, each producer's in the order it posted, waiting or not")
    func mailbox() async {
        let events = Mailbox<Int>()
        events.post(-1)
        #expect(await events.next() == -1, "an event posted before the consumer waits is kept")
        let producers = 8
        let each = 500
        await withDiscardingTaskGroup { group in
            for producer in 0..<producers {
                group.addTask { for n in 0..<each { events.post(producer * each + n) } }
            }
            var last = [Int](repeating: -1, count: producers)
            var seen = 0
            while seen < producers * each {
                let event = await events.next()
                let (producer, n) = event.quotientAndRemainder(dividingBy: each)
                #expect(n == last[producer] + 1, "producer \(producer)'s events in order, none lost or repeated")
                last[producer] = n
                seen += 1
            }
        }
    }

    @Test("the timeout clock fires each limit once, in order, and a cancelled one never")
    func timeoutClock() async throws {
        let clock = TimeoutClock(resolution: .milliseconds(5))
        let fired = Mutex<[Int]>([])
        let done = Gate()
        let cancelled = clock.schedule(after: .milliseconds(10)) { fired.withLock { $0.append(0) } }
        for (index, milliseconds) in [(2, 30), (1, 15), (3, 45)] {
            clock.schedule(after: .milliseconds(milliseconds)) {
                let count = fired.withLock { fired in
                    fired.append(index)
                    return fired.count
                }
                if count == 3 { done.open() }
            }
        }
        clock.cancel(cancelled)
        #expect(clock.pending == 3)
        await done.wait()
        #expect(fired.withLock { $0 } == [1, 2, 3])
        #expect(clock.pending == 0)
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
                        // Time is what is tested: each task holds its slot a while, so the others must queue.
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

    @Test("the run's verdict: unavailable when nothing reached the backend, partial per --fail-on, else none")
    func verdict() {
        let unreachable = ResolveFailure.unreachable("cannot connect")
        func summary(warmed: Int = 0, noFlow: Int = 0, failed: Int = 0, answered: Int = 1, unanswered: Int = 0)
            -> WarmRun.Summary
        {
            var counts = WarmRun.Counts()
            (counts.warmed, counts.noFlow, counts.failed) = (warmed, noFlow, failed)
            var reach = BackendReach()
            for _ in 0..<answered { reach.record(nil) }
            for _ in 0..<unanswered { reach.record(unreachable) }
            return WarmRun.Summary(counts: counts, reach: reach, late: LateResolves(), elapsed: .zero)
        }
        #expect(summary(failed: 2, answered: 0, unanswered: 2).verdict(failOn: .never) == .unavailable)
        #expect(
            summary(warmed: 1, failed: 1, answered: 0, unanswered: 2).verdict(failOn: .failed) == .partial,
            "a flow served from a fallback tier is not 'unavailable'")
        #expect(summary(warmed: 1, failed: 1).verdict(failOn: .failed) == .partial)
        #expect(summary(warmed: 1, noFlow: 1).verdict(failOn: .failed) == nil)
        #expect(summary(warmed: 1, noFlow: 1).verdict(failOn: .noFlow) == .partial)
        #expect(summary(failed: 1).verdict(failOn: .never) == nil)
        #expect(summary(warmed: 1, answered: 0).verdict(failOn: .failed) == nil)
    }

    @Test("BackendReach: none reached only when requests were made and every one got no answer")
    func reach() {
        var reach = BackendReach()
        #expect(!reach.reachedNone && reach.error == nil, "no request made is not 'unreachable'")
        reach.record(.tls("the certificate is not trusted"))
        reach.record(.proxy("cannot connect to the proxy"))
        #expect(reach.reachedNone)
        #expect(reach.explanation == "no request reached the backend: tls: the certificate is not trusted")
        reach.record(.http(status: 503))
        #expect(!reach.reachedNone, "a backend that answered 503 was reached")
    }
}
