/// Where a flow came from (`delivery_source`).
public enum Tier: String, Sendable, Codable, CaseIterable {
    case cache, network
    case staleCache = "stale_cache"
    case bundledDefault = "bundled_default"

    public var number: Int {
        switch self {
        case .cache: 0
        case .network: 1
        case .staleCache: 2
        case .bundledDefault: 3
        }
    }

    /// True for the tiers served from a local cached copy (`from_cache`).
    public var isLocalCopy: Bool { self == .cache || self == .staleCache }
}
