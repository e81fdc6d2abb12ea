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
    /// The directory's summary, fresh and stale and expired as of `now`: a
    /// format-2 log unchanged since its last compaction from the summary
    /// that compaction wrote (`LogSummary`), else from its segments'
    /// indexes and facts (`FactsSurvey`), any other by walking every entry.
    public func summary(at now: Date) -> CacheSummary {
        restingSummary(at: now) ?? factsSummary(at: now) ?? walkedSummary(at: now)
    }

    /// `summary(at:)` from the log's indexes and facts alone, no record
    /// read but where two of one key cannot be told apart by them; nil
    /// where they cannot answer (`FactsSurvey`).
    func factsSummary(at now: Date) -> CacheSummary? { counted(readEntries.surveyedCounts(at: now), at: now) }

    /// `summary(at:)` from `LogSummary` alone, nil when there is none that
    /// still holds, or freshness at `now` needs the entries themselves.
    func restingSummary(at now: Date) -> CacheSummary? { counted(readEntries.restingCounts(at: now), at: now) }

    /// The summary of counts made without walking the entries (nil: none),
    /// with images and fonts by their listing, as always.
    private func counted(_ counts: RestingCounts?, at now: Date) -> CacheSummary? {
        guard let counts else { return nil }
        return assemble(
            scan: scan(log: usesLog, survey: .none), now: now, counts: counts.counts, aliases: counts.aliases,
            oldest: counts.oldest, newest: counts.newest)
    }

    /// `summary(at:)` by walking every entry.
    func walkedSummary(at now: Date) -> CacheSummary {
        var scan = scan()
        // Counted as the entries are walked: nothing an entry is held.
        // Each placement's counts, found by its name's bytes: the last one counted is tried first.
        var counts: [(name: String, entries: Int, fresh: Int, bytes: Int64)] = []
        var numbered: [ExactName: Int] = [:]
        var last = 0
        var (oldest, newest): (Date?, Date?) = (nil, nil)
        scan.walkFacts { entry in
            let isFresh = entry.isFresh(at: now)
            if last >= counts.count || !counts[last].name.sameBytes(as: entry.placement) {
                // A few placements are looked for in turn (records of two placements alternate); many, by name.
                if counts.count <= 8, let known = counts.firstIndex(where: { $0.name.sameBytes(as: entry.placement) }) {
                    last = known
                } else if let known = numbered[ExactName(entry.placement)] {
                    last = known
                } else {
                    last = counts.count
                    numbered[ExactName(entry.placement)] = last
                    counts.append((entry.placement, 0, 0, 0))
                }
            }
            counts[last].entries += 1
            counts[last].bytes += entry.size
            if isFresh { counts[last].fresh += 1 }
            oldest = min(oldest ?? entry.resolvedAt, entry.resolvedAt)
            newest = max(newest ?? entry.resolvedAt, entry.resolvedAt)
        }
        return assemble(
            scan: scan, now: now, counts: counts, aliases: scan.aliases.map(\.placementDirectory), oldest: oldest,
            newest: newest)
    }

    /// The summary of `counts` (a placement's entries, fresh ones and
    /// bytes), the placements with an alias (by directory name), and the
    /// scan's images and fonts.
    private func assemble(
        scan: CacheScan, now: Date, counts: [(name: String, entries: Int, fresh: Int, bytes: Int64)],
        aliases: [String], oldest: Date?, newest: Date?
    ) -> CacheSummary {
        let locks = locksWork()
        let (flows, fresh) = (counts.reduce(0) { $0 + $1.entries }, counts.reduce(0) { $0 + $1.fresh })
        let bytes = counts.reduce(Int64(0)) { $0 + $1.bytes }
        let placements = Dictionary(
            uniqueKeysWithValues: counts.map {
                (ExactName($0.name), (entries: $0.entries, fresh: $0.fresh, bytes: $0.bytes))
            })
        // By directory name: a placement too long for a name has its hash there (docs/cache-format.md, "Names").
        let aliased = Set(aliases.map { ExactName($0) })
        return CacheSummary(
            cacheDir: root, flows: flows, fresh: fresh, stale: flows - fresh,
            aliases: aliases.count, flowBytes: bytes, images: scan.images.count,
            expiredImages: scan.images.filter { $0.isExpired(at: now, ttl: budgets.imageTTL) }.count,
            imageBytes: scan.imageBytes, imageBudgetBytes: budgets.imageDiskBytes,
            fonts: scan.fonts.count, fontBytes: scan.fontBytes,
            oldestResolvedAt: oldest, newestResolvedAt: newest,
            placements: placements.sorted { $0.key < $1.key }.map { key, counts in
                CacheSummary.Placement(
                    placement: key.string, entries: counts.entries, fresh: counts.fresh,
                    stale: counts.entries - counts.fresh,
                    bytes: counts.bytes, alias: aliased.contains(ExactName(CacheNames.placement(key.string))))
            }, locksWork: locks, fileSystem: locks == false ? Platform.fileSystemType(of: root) : nil)
    }
}
