import Foundation

/// The SDK's PrefetchOutcome for one (identity, placement), with what a report needs.
public struct PrefetchOutcome: Sendable {
    public enum State: String, Sendable, CaseIterable {
        case warmed
        case noFlow = "no_flow"
        case failed
    }

    /// The fields behind one reference: an outcome goes from the chain to
    /// the counts, the report and the summary, and a copy costs one retain.
    private final class Storage: Sendable {
        let identity: Identity
        let placement: String
        let state: State
        let deliverySource: Tier?
        let mediaWarmed: Bool
        let flowID: String?
        let version: String?
        let ttlSeconds: Int?
        let milliseconds: Int
        let failure: ResolveFailure?

        init(
            _ identity: Identity, _ placement: String, _ state: State, _ deliverySource: Tier?, _ mediaWarmed: Bool,
            _ flowID: String?, _ version: String?, _ ttlSeconds: Int?, _ milliseconds: Int, _ failure: ResolveFailure?
        ) {
            (self.identity, self.placement, self.state, self.deliverySource) = (
                identity, placement, state, deliverySource
            )
            (self.mediaWarmed, self.flowID, self.version, self.ttlSeconds) = (mediaWarmed, flowID, version, ttlSeconds)
            (self.milliseconds, self.failure) = (milliseconds, failure)
        }
    }

    private let storage: Storage

    public var identity: Identity { storage.identity }
    public var placement: String { storage.placement }
    public var state: State { storage.state }
    /// The tier that served a `warmed` outcome.
    public var deliverySource: Tier? { storage.deliverySource }
    public var mediaWarmed: Bool { storage.mediaWarmed }
    public var flowID: String? { storage.flowID }
    public var version: String? { storage.version }
    public var ttlSeconds: Int? { storage.ttlSeconds }
    public var milliseconds: Int { storage.milliseconds }
    /// Why a `failed` outcome failed.
    public var failure: ResolveFailure? { storage.failure }

    /// For `warmed`: true from a local copy (fresh or stale), false from network or bundle.
    public var fromCache: Bool { deliverySource?.isLocalCopy ?? false }
    public var errorCode: String? { failure?.code }
    public var errorMessage: String? { failure?.message }

    /// The outcome of one chain decision, `start` being when the prefetch began.
    init(
        _ identity: Identity, _ placement: String, _ decision: TierChain.Decision, mediaWarmed: Bool,
        since start: ContinuousClock.Instant
    ) {
        let milliseconds = Self.milliseconds(since: start)
        switch decision {
        case .serve(let served):
            storage = Storage(
                identity, placement, .warmed, served.tier, mediaWarmed, served.document.id, served.document.version,
                served.ttlSeconds, milliseconds, nil)
        case .noFlow:
            storage = Storage(identity, placement, .noFlow, nil, mediaWarmed, nil, nil, nil, milliseconds, nil)
        case .fail(let reason):
            storage = Storage(identity, placement, .failed, nil, mediaWarmed, nil, nil, nil, milliseconds, reason)
        }
    }

    public static func milliseconds(since start: ContinuousClock.Instant) -> Int {
        let elapsed = ContinuousClock.now - start
        return Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
    }
}
