import Foundation

/// The SDK's PrefetchOutcome for one (identity, placement), with what a report needs.
public struct PrefetchOutcome: Sendable {
    public enum State: String, Sendable, CaseIterable {
        case warmed
        case noFlow = "no_flow"
        case failed
    }

    public let identity: Identity
    public let placement: String
    public let state: State
    /// The tier that served a `warmed` outcome.
    public let deliverySource: Tier?
    public let mediaWarmed: Bool
    public let flowID: String?
    public let version: String?
    public let ttlSeconds: Int?
    public let milliseconds: Int
    /// Why a `failed` outcome failed.
    public let failure: ResolveFailure?

    /// For `warmed`: true from a local copy (fresh or stale), false from network or bundle.
    public var fromCache: Bool { deliverySource?.isLocalCopy ?? false }
    public var errorCode: String? { failure?.code }
    public var errorMessage: String? { failure?.message }

    /// The outcome of one chain decision, `start` being when the prefetch began.
    init(
        _ identity: Identity, _ placement: String, _ decision: TierChain.Decision, mediaWarmed: Bool,
        since start: ContinuousClock.Instant
    ) {
        self.identity = identity
        self.placement = placement
        self.milliseconds = Self.milliseconds(since: start)
        self.mediaWarmed = mediaWarmed
        switch decision {
        case .serve(let served):
            (state, deliverySource, failure) = (.warmed, served.tier, nil)
            (flowID, version, ttlSeconds) = (served.document.id, served.document.version, served.ttlSeconds)
        case .noFlow:
            (state, deliverySource, failure) = (.noFlow, nil, nil)
            (flowID, version, ttlSeconds) = (nil, nil, nil)
        case .fail(let reason):
            (state, deliverySource, failure) = (.failed, nil, reason)
            (flowID, version, ttlSeconds) = (nil, nil, nil)
        }
    }

    public static func milliseconds(since start: ContinuousClock.Instant) -> Int {
        let elapsed = ContinuousClock.now - start
        return Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
    }
}
