import FlowPilotCore
import Foundation

/// One placement's walk down the resolution chain, for people and for scripts: each
/// tier tried, what it found and why, then the result (`fpctl resolve`).
public struct ResolveTrace: Rendering {
    public let resolution: Warmer.Resolution
    public let identity: Identity
    /// Why the bundled tier was not looked at when no bundle was given.
    public var noBundleGiven = "no bundle given"

    public init(_ resolution: Warmer.Resolution, identity: Identity) {
        self.resolution = resolution
        self.identity = identity
    }

    /// A line per tier tried (`tier 0 cache: hit, fresh (age 12s of 300s)`), then
    /// `result: …`: the tier that served and the flow, `no flow`, or `failed (CODE)`.
    public func text() -> String {
        var out = resolution.steps.map { "tier \($0.tier) \(Self.source($0)): \(Printable.escaped(reason($0)))\n" }
            .joined()
        let outcome = resolution.outcome
        if outcome.state == .warmed, let doc = resolution.document, let tier = outcome.deliverySource {
            out += "result: \(tier.rawValue) (tier \(tier.number)), from_cache \(outcome.fromCache), flow \(doc.id) "
            out += "version \(doc.version), \(doc.allImages.count) images, \(doc.fonts.count) fonts\n"
        } else {
            out += outcome.state == .noFlow ? "result: no flow\n" : "result: failed (\(outcome.errorCode ?? "error"))\n"
        }
        return out
    }

    /// The same trace as one JSON document (`resolve --format json`).
    public var document: Document { Document(self) }

    public static var formats: [OutputFormat] { [.text, .json] }

    /// Where a step looked, by its tier.
    static func source(_ step: TierChain.Step) -> String {
        ["cache", "live resolve", "stale cache", "bundled default"][step.tier]
    }

    /// What a step found, in words.
    func reason(_ step: TierChain.Step) -> String {
        switch step {
        case .freshHit(let age, let ttl): "hit, fresh (age \(age)s of \(ttl)s)"
        case .staleEntry(let age, let ttl): "entry is stale (age \(age)s, ttl \(ttl)s)"
        case .noEntry: "no entry for this identity"
        case .liveFlow(let ttl): "ok, cached with ttl \(ttl)s"
        case .liveFlowUnstored(_, let reason): "ok, served but not cached (cache-write: \(reason))"
        case .liveNoFlow: "the backend has no flow for this placement"
        case .liveFailed(let failure): "failed (\(failure))"
        case .staleServed: "served the last-known-good flow"
        case .staleMissing: "nothing cached"
        case .bundledServed: "served from the bundle"
        case .bundledMissing(let given): given ? "the bundle has no such placement" : noBundleGiven
        }
    }

    /// What a step's tier did: served, stale, miss, no_flow or failed.
    static func outcome(_ step: TierChain.Step) -> String {
        switch step {
        case .freshHit, .liveFlow, .liveFlowUnstored, .staleServed, .bundledServed: "served"
        case .staleEntry: "stale"
        case .noEntry, .staleMissing, .bundledMissing: "miss"
        case .liveNoFlow: "no_flow"
        case .liveFailed: "failed"
        }
    }

    /// The JSON document: placement, identity, each tier tried, the result.
    public struct Document: Encodable {
        struct Tier: Encodable {
            let tier: Int
            let source: String
            let outcome: String
            let reason: String
            var ageSeconds: Int?
            var ttlSeconds: Int?
            var error: ErrorInfo?
        }
        struct ErrorInfo: Encodable {
            let code: String
            let message: String
        }
        struct Result: Encodable {
            let state: String
            let deliverySource: String?
            let tier: Int?
            let fromCache: Bool
            let flowId: String?
            let version: String?
            let images: Int?
            let fonts: Int?
            let error: ErrorInfo?
        }
        let placement: String
        let userId: String
        let fingerprint: String
        let tiers: [Tier]
        let result: Result

        init(_ trace: ResolveTrace) {
            let o = trace.resolution.outcome
            placement = o.placement
            userId = trace.identity.userID
            fingerprint = trace.identity.fingerprint
            tiers = trace.resolution.steps.map { Self.tier($0, of: trace) }
            let doc = trace.resolution.document
            result = Result(
                state: o.state.rawValue, deliverySource: o.deliverySource?.rawValue, tier: o.deliverySource?.number,
                fromCache: o.fromCache, flowId: doc?.id, version: doc?.version, images: doc?.allImages.count,
                fonts: doc?.fonts.count,
                error: o.errorCode.map { ErrorInfo(code: $0, message: o.errorMessage ?? "") })
        }

        static func tier(_ step: TierChain.Step, of trace: ResolveTrace) -> Tier {
            var t = Tier(
                tier: step.tier, source: ResolveTrace.source(step).replacingOccurrences(of: " ", with: "_"),
                outcome: ResolveTrace.outcome(step), reason: trace.reason(step))
            switch step {
            case .freshHit(let age, let ttl), .staleEntry(let age, let ttl): (t.ageSeconds, t.ttlSeconds) = (age, ttl)
            case .liveFlow(let ttl): t.ttlSeconds = ttl
            case .liveFlowUnstored(let ttl, let reason):
                t.ttlSeconds = ttl
                t.error = ErrorInfo(code: "cache-write", message: reason)
            case .liveFailed(let failure): t.error = ErrorInfo(code: failure.code, message: failure.message)
            default: break
            }
            return t
        }
    }
}
