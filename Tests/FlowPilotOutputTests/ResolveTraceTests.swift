import FlowPilotCore
import FlowPilotOutput
import Foundation
import Testing

@Suite("the resolve trace, as a library caller gets it")
struct ResolveTraceTests {
    let identity = Identity(userID: "u1")

    /// A live resolve refused for an untrusted certificate, no stale entry, no bundle.
    func untrusted() -> Warmer.Resolution {
        let failure = ResolveFailure.tls("handshake failed: CERTIFICATE_VERIFY_FAILED")
        let (steps, decision) = TierChain.afterLive(
            .failure(failure), defaultTTL: 300, stale: { nil }, bundled: { nil }, bundleGiven: false)
        return Warmer.Resolution("paywall", for: identity, steps: [.noEntry] + steps, decision: decision)
    }

    @Test("every tier tried is a line, then the failure; no command-line flag is named")
    func failedWithoutFlags() throws {
        let text = ResolveTrace(untrusted(), identity: identity).text()
        #expect(
            text == """
                tier 0 cache: no entry for this identity
                tier 1 live resolve: failed (tls: handshake failed: CERTIFICATE_VERIFY_FAILED)
                tier 2 stale cache: nothing cached
                tier 3 bundled default: no bundle given
                result: failed (tls)

                """)
        #expect(!text.contains("--"))
    }

    @Test("a caller words the missing bundle its own way, in text and JSON alike; a failure reads as it is named")
    func callerWording() throws {
        var trace = ResolveTrace(untrusted(), identity: identity)
        trace.noBundleGiven = "no bundle here"
        #expect(
            trace.text().contains("tier 1 live resolve: failed (tls: handshake failed: CERTIFICATE_VERIFY_FAILED)\n"))
        let json = try #require(try JSONValue.parse(Data(trace.rendered(as: .json).utf8)).objectValue)
        let tiers = try #require(json["tiers"]?.arrayValue)
        #expect(tiers.count == 4)
        #expect(tiers[1].objectValue?["reason"] == .string("failed (tls: handshake failed: CERTIFICATE_VERIFY_FAILED)"))
        #expect(tiers[3].objectValue?["reason"] == .string("no bundle here"))
        #expect(json["result"]?.objectValue?["state"] == .string("failed"))
        #expect(json["user_id"] == .string("u1"))
    }
}
