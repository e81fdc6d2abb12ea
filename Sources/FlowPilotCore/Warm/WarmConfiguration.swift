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
    /// How long past `resolveTimeout` an identity's row waits for its images
    /// (`warm --grace`): a late or trickling download never holds a row
    /// longer; it goes on in the background, bounded by its own deadline.
    public var mediaGrace: Duration = WarmLimits.defaultGrace
    public var media = MediaStrategy.firstScreen
    public var batch = true
    public var mediaConcurrency = WarmLimits.defaultConcurrency
    /// The time the run takes as now, for reproducible runs (fpctl reads it
    /// from `FPCTL_NOW`): which cached flows are fresh, and the `resolved_at`
    /// of the flows it writes. nil: the clock.
    public var now: Date?
    public init() {}

    /// `now`, or the clock's time when it is not pinned.
    var currentTime: Date { now ?? Date() }
}
