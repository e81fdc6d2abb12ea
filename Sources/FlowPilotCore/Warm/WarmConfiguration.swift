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
