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
