import Foundation

/// What a cache directory holds at a moment, from its listing alone (no entry
/// is read): flows fresh and stale, aliases, images against their budget,
/// fonts, and the same per placement. What `fpctl cache info` shows.
public struct CacheSummary: Sendable, Encodable {
    public struct Placement: Sendable, Encodable {
        public let placement: String
        public let entries: Int
        public let fresh: Int
        public let stale: Int
        public let bytes: Int64
        /// The placement has a last-known-good alias.
        public let alias: Bool
    }

    public let cacheDir: String
    public let flows: Int
    public let fresh: Int
    public let stale: Int
    public let aliases: Int
    public let flowBytes: Int64
    public let images: Int
    public let expiredImages: Int
    public let imageBytes: Int64
    public let imageBudgetBytes: Int64
    public let fonts: Int
    public let fontBytes: Int64
    public let oldestResolvedAt: Date?
    public let newestResolvedAt: Date?
    /// By placement key.
    public let placements: [Placement]
    /// Whether the cache's lock keeps a second process out (`CacheStore.locksWork`):
    /// false on a file system whose `flock` succeeds but locks nothing, where
    /// `prune`, `clear` and `verify --repair` refuse; nil when it cannot be told.
    public let locksWork: Bool?
    /// The file system's type, as the mount table names it, when `locksWork` is false.
    public let fileSystem: String?
}

extension CacheStore {
    /// The directory's summary, fresh and stale and expired as of `now`.
    public func summary(at now: Date) -> CacheSummary {
        let scan = scan()
        let locks = locksWork()
        let fresh = scan.flows.filter { $0.isFresh(at: now) }.count
        var byPlacement: [String: [CachedFlow]] = [:]
        for f in scan.flows { byPlacement[f.placement, default: []].append(f) }
        // By directory name: a placement too long for a name has its hash there (docs/cache-format.md, "Names").
        let aliased = Set(scan.aliases.map(\.placementDirectory))
        return CacheSummary(
            cacheDir: root, flows: scan.flows.count, fresh: fresh, stale: scan.flows.count - fresh,
            aliases: scan.aliases.count, flowBytes: scan.flowBytes, images: scan.images.count,
            expiredImages: scan.images.filter { $0.isExpired(at: now, ttl: budgets.imageTTL) }.count,
            imageBytes: scan.imageBytes, imageBudgetBytes: budgets.imageDiskBytes,
            fonts: scan.fonts.count, fontBytes: scan.fontBytes,
            oldestResolvedAt: scan.flows.map(\.resolvedAt).min(),
            newestResolvedAt: scan.flows.map(\.resolvedAt).max(),
            placements: byPlacement.sorted { $0.key < $1.key }.map { key, list in
                let f = list.filter { $0.isFresh(at: now) }.count
                return CacheSummary.Placement(
                    placement: key, entries: list.count, fresh: f, stale: list.count - f,
                    bytes: list.reduce(0) { $0 + $1.size }, alias: aliased.contains(CacheNames.placement(key)))
            }, locksWork: locks, fileSystem: locks == false ? Platform.fileSystemType(of: root) : nil)
    }
}
