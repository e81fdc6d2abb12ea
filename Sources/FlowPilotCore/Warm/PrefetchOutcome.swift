import Foundation

/// `production 300, staging 60, development 0, custom 0` seconds of default TTL.
public enum SDKEnvironment: String, Sendable, CaseIterable {
    case production, staging, development, custom

    public var defaultTTL: Int {
        switch self {
        case .production: 300
        case .staging: 60
        case .development, .custom: 0
        }
    }
}

/// Which images a prefetch warms (the flow's media sets: first screen and
/// persistent zones, or every screen).
public enum MediaStrategy: String, Sendable, CaseIterable {
    case none
    case firstScreen = "first-screen"
    case allScreens = "all-screens"
}

/// Settings of a warm run.
public struct WarmConfiguration: Sendable {
    public var environment = SDKEnvironment.production
    public var resolveTimeout: Duration = .seconds(4)
    public var media = MediaStrategy.firstScreen
    public var batch = true
    public var mediaConcurrency = 8
    public init() {}
}

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
