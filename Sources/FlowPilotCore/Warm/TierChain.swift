import Foundation

/// The SDK's resolution chain as plain decisions, with no I/O of its own:
/// Tier 0 a fresh cache hit for this identity, Tier 1 the live resolve, Tier 2
/// the last-known-good (this identity's stale entry, then the placement's alias),
/// Tier 3 the bundled default. The caller looks things up; the chain decides,
/// and records each tier it tried as a `Step` (what `fpctl resolve` prints).
public enum TierChain {
    /// A flow a tier can serve.
    public struct Served: Sendable {
        public let tier: Tier
        public let document: FlowDocument
        /// Freshness of the served copy; nil for the bundled default.
        public let ttlSeconds: Int?
    }

    public enum Decision: Sendable {
        case serve(Served)
        /// The backend answered that it has nothing to show here.
        case noFlow
        /// The live resolve failed and no fallback tier had a flow.
        case fail(ResolveFailure)
    }

    /// One tier tried, and what it found.
    public enum Step: Sendable, Equatable {
        case freshHit(ageSeconds: Int, ttlSeconds: Int)
        case staleEntry(ageSeconds: Int, ttlSeconds: Int)
        case noEntry
        case liveFlow(ttlSeconds: Int)
        /// The backend's flow, served though the cache could not keep it (`reason`).
        case liveFlowUnstored(ttlSeconds: Int, reason: String)
        case liveNoFlow
        case liveFailed(ResolveFailure)
        case staleServed
        case staleMissing
        case bundledServed
        /// Tier 3 had nothing: no bundle was given, or it lacks the placement.
        case bundledMissing(bundleGiven: Bool)

        /// The tier the step belongs to: 0 cache, 1 live, 2 stale, 3 bundled.
        public var tier: Int {
            switch self {
            case .freshHit, .staleEntry, .noEntry: 0
            case .liveFlow, .liveFlowUnstored, .liveNoFlow, .liveFailed: 1
            case .staleServed, .staleMissing: 2
            case .bundledServed, .bundledMissing: 3
            }
        }
    }

    /// Tier 0: serve this identity's cached entry while it is fresh.
    public static func cached(_ entry: (CachedFlow, FlowDocument)?, now: Date) -> (Step, Decision?) {
        guard let (flow, document) = entry else { return (.noEntry, nil) }
        let age = Int(flow.age(at: now))
        guard flow.isFresh(at: now) else { return (.staleEntry(ageSeconds: age, ttlSeconds: flow.ttlSeconds), nil) }
        let served = Served(tier: .cache, document: document, ttlSeconds: flow.ttlSeconds)
        return (.freshHit(ageSeconds: age, ttlSeconds: flow.ttlSeconds), .serve(served))
    }

    /// Tiers 1 to 3 once the live resolve answered, or failed (a caller's timeout
    /// is a failure too). `stale` and `bundled` are asked only when needed.
    public static func afterLive(
        _ live: Result<LiveResult, ResolveFailure>, defaultTTL: Int,
        stale: () -> (CachedFlow, FlowDocument)?, bundled: () -> FlowDocument?, bundleGiven: Bool,
        serveUnstored: Bool = false
    ) -> ([Step], Decision) {
        let failure: ResolveFailure
        switch live {
        case .success(.unstored(let document, let ttlSeconds, let reason)):
            // The backend has the flow: a chain that shows it (resolve, ready) shows it; a warm, whose
            // work is the cache, failed. Either way no older copy hides a cache that cannot be written.
            guard serveUnstored else { return ([.liveFailed(.cacheWrite(reason))], .fail(.cacheWrite(reason))) }
            return (
                [.liveFlowUnstored(ttlSeconds: ttlSeconds, reason: reason)],
                .serve(Served(tier: .network, document: document, ttlSeconds: ttlSeconds))
            )
        case .success(.flow(let document, let ttl)):
            let ttlSeconds = ttl ?? defaultTTL
            return (
                [.liveFlow(ttlSeconds: ttlSeconds)],
                .serve(Served(tier: .network, document: document, ttlSeconds: ttlSeconds))
            )
        case .success(.noFlow):
            return ([.liveNoFlow], .noFlow)
        case .success(.failed(let reason)), .failure(let reason):
            failure = reason
        }
        // A broken cache directory is not hidden behind an older copy in it.
        if case .cacheWrite = failure { return ([.liveFailed(failure)], .fail(failure)) }
        if let (flow, document) = stale() {
            let served = Served(tier: .staleCache, document: document, ttlSeconds: flow.ttlSeconds)
            return ([.liveFailed(failure), .staleServed], .serve(served))
        }
        if let document = bundled() {
            let served = Served(tier: .bundledDefault, document: document, ttlSeconds: nil)
            return ([.liveFailed(failure), .staleMissing, .bundledServed], .serve(served))
        }
        return ([.liveFailed(failure), .staleMissing, .bundledMissing(bundleGiven: bundleGiven)], .fail(failure))
    }
}
