import Foundation

extension CacheStore {
    public struct PruneOptions: Sendable {
        /// Images past their TTL.
        public var expired = false
        /// Flows resolved, and images last used, longer ago than this.
        public var olderThan: TimeInterval?
        /// Images beyond this many bytes, least recently used first.
        public var maxImageBytes: Int64?
        /// That identity's flow entries and every alias pointing at them.
        public var userID: String?
        /// Images and fonts no cached flow refers to.
        public var unreferenced = false
        public var flows = true
        public var images = true
        public var dryRun = false
        /// The time ages are measured from (`FPCTL_NOW`); nil: the clock, read
        /// once the lock is held. A prune that waited for writers must not take
        /// what they wrote meanwhile for entries from the future.
        public var now: Date?
        public init() {}
    }

    /// Removes what the options select, plus superseded files (older copies of a
    /// key that readers already ignore). A stale flow goes only when asked for.
    /// In memory that does not grow with the cache or with what goes: the
    /// removals wait in a `SpilledList`, and a compaction asks the rule of
    /// each record it copies, not a set of what was chosen.
    public func prune(_ o: PruneOptions) throws -> RemovalResult {
        let work = { () throws -> RemovalResult in
            var selection = try PruneSelection(store: self, scan: self.scan(), options: o, now: o.now ?? Date())
            try selection.addDebris()
            try selection.walkFlows()
            if o.images { try selection.addImages() }
            if o.unreferenced { try selection.addUnreferenced() }
            if o.dryRun {
                return RemovalResult(
                    planned: selection.removals, bytes: selection.bytes, deferred: selection.deferred)
            }
            if !selection.scan.migrationLeftovers.isEmpty {
                // Carried into the log first, never deleted; a failure (a full disk) leaves them for the next.
                _ = try? CacheMigration(store: self).carryOverFormatOneTrees()
            }
            return try self.carryOut(selection)
        }
        return o.dryRun ? try work() : try withLock(exclusive: true, work)
    }

    /// Removes what `selection` chose: records (format 2's) by one rewrite
    /// of what holds them that drops what the rule selects
    /// (`FlowEntries.removeRecords`), every file by `unlink`; reports only
    /// what was really removed (a file already gone counts as removed), in
    /// the order chosen, then the flows the rewrite left unreferenced.
    private func carryOut(_ selection: PruneSelection) throws -> RemovalResult {
        let result = RemovalResult(deferred: selection.deferred)
        let (scan, entries) = (selection.scan, selection.entries)
        // Why a segment's records are still there: the rewrite failed (all of them), or it could not go.
        var failure: String?
        var stuck: [String: String] = [:]
        var objects: [Removal] = []
        if selection.records > 0 || !scan.logProblems.isEmpty {
            let rule = selection.rule
            do {
                let removed = try entries.removeRecords { record, path in rule.removes(record, at: path) }
                objects = removed.objects.map {
                    Removal(kind: .orphan, path: relative($0.path), bytes: $0.size, reason: "flow no entry points at")
                }
                for (path, reason) in removed.notRemoved where stuck[path] == nil {
                    stuck[path] = "\(relative(path)): \(reason)"
                }
            } catch {
                failure = "\(error)"
            }
        }
        try selection.removals.each { removal in
            let path = "\(root)/\(removal.path)"
            if entries.isRecord(path) {
                let segment = path.prefixBytes(before: UInt8(ascii: "#"))
                if let why = failure ?? stuck[segment] {
                    try result.fail(removal, why)
                } else {
                    try result.remove(removal)
                }
            } else if let why = unlinkRemoval(removal) {
                try result.fail(removal, why)
            } else {
                try result.remove(removal)
            }
        }
        try objects.forEach(result.remove)
        return result
    }

    /// Unlinks one removal, and the directory it leaves empty; nil when it is
    /// gone (already gone included), else why not.
    private func unlinkRemoval(_ removal: Removal) -> String? {
        let path = "\(root)/\(removal.path)"
        let gone = removal.kind == .directory ? rmdir(path) == 0 : unlink(path) == 0
        guard gone || errno == ENOENT else { return Errno.describe(errno) }
        if removal.kind == .directory { return nil }
        let dir = PathName.parent(of: path)
        if removal.kind == .image { Self.removeImageDirIfEmpty(path) } else if dir != fontsDir { rmdir(dir) }
        return nil
    }
}

extension Removal: SpilledRow {
    public var cells: [String] { [kind.rawValue, path, String(bytes), reason] }

    public init?(cells: [String]) {
        guard cells.count == 4, let kind = Kind(rawValue: cells[0]), let bytes = Int64(cells[2]) else { return nil }
        self.init(kind: kind, path: cells[1], bytes: bytes, reason: cells[3])
    }
}

/// What `prune` removed (with `dryRun`, would remove), and what it could
/// not: lists read in order, any number of times, that hold ten million
/// removals in the memory of a few thousand (`SpilledList`).
public final class RemovalResult {
    public struct Failure: SpilledRow {
        public let removal: Removal
        public let reason: String

        public var cells: [String] { removal.cells + [reason] }

        public init(removal: Removal, reason: String) { (self.removal, self.reason) = (removal, reason) }

        public init?(cells: [String]) {
            guard cells.count == 5, let removal = Removal(cells: Array(cells.prefix(4))) else { return nil }
            self.init(removal: removal, reason: cells[4])
        }
    }

    /// Rows each list of a prune holds in memory before the rest wait in its scratch file: a prune
    /// holds three such lists at once (what the walk chose, the selection, the result).
    public static let rowsInMemory = 4_096

    public let removed: SpilledList<Removal>
    public let failed = SpilledList<Failure>(inMemory: RemovalResult.rowsInMemory)
    /// The bytes of what `removed` holds.
    public private(set) var removedBytes: Int64 = 0
    /// Format 2: entries older than `--older-than` in a segment a writer is
    /// still appending to (docs/cache-format.md, "Compaction"), left for the
    /// next prune: not removed, and no failure.
    public let deferred: Int

    init(deferred: Int = 0) {
        removed = SpilledList(inMemory: RemovalResult.rowsInMemory)
        self.deferred = deferred
    }

    /// A dry run's result: the selection's own list, not a copy of it.
    init(planned: SpilledList<Removal>, bytes: Int64, deferred: Int) {
        (removed, removedBytes, self.deferred) = (planned, bytes, deferred)
    }

    func remove(_ removal: Removal) throws {
        try removed.append(removal)
        removedBytes += removal.bytes
    }

    func fail(_ removal: Removal, _ reason: String) throws {
        try failed.append(Failure(removal: removal, reason: reason))
    }
}

/// What one prune removes: the rule, asked of each entry (a format-2
/// record in place, its entry made only when it goes), and of each record
/// a compaction copies.
struct PruneRule {
    let options: CacheStore.PruneOptions
    let now: Date
    /// Format 2: the segments a writer still holds (`CacheScan.liveSegments`).
    let live: Set<String>
    /// The format of the entries asked about (`FlowEntries.isUser`).
    let entries: any FlowEntries

    /// Why `options` remove an entry, nil when they keep it.
    func reason(_ entry: CachedFlow) -> String? {
        let identity = options.userID.map { entries.isUser($0, of: entry) } ?? false
        return Self.rule(age: entry.age(at: now), identity: identity, options: options)
    }

    /// Whether this prune removes an entry a walk handed over (or an alias's target):
    /// the rule selects it, and it is not left for the next prune.
    func removes(_ entry: CachedFlow) -> Bool {
        options.flows && reason(entry) != nil && !defers(entry.path)
    }

    /// Whether the rule selects a format-2 record, of its time and user id in place.
    func selects(resolvedAt: Date, userID: UnsafeRawBufferPointer) -> Bool {
        options.flows
            && Self.rule(
                age: now.timeIntervalSince(resolvedAt),
                identity: options.userID.map { $0.sameBytes(as: userID) } ?? false, options: options) != nil
    }

    /// Whether an entry at `path` selected by age stays for the next prune:
    /// in a live writer's segment (one identity's entries are asked for by
    /// name, so those are tried, and a failure if they stay). Never format
    /// 1's: it has no segments.
    func defers(_ path: String) -> Bool {
        options.userID == nil && !live.isEmpty && live.contains(path.prefixBytes(before: UInt8(ascii: "#")))
    }

    /// Whether this prune removes the format-2 record at `path` (what a
    /// compaction drops). Only entries: an alias carries the time of the
    /// entry it was first pointed at, not its target's now, and goes with
    /// its target, which the compaction asks of its key's survivor.
    func removes(_ record: LogRecord, at path: String) -> Bool {
        guard record.kind == .entry, options.flows, !defers(path) else { return false }
        let identity = options.userID.map { record.userID.sameBytes(as: $0) } ?? false
        let age = now.timeIntervalSince(LogRecord.date(millis: record.resolvedAtMillis))
        return Self.rule(age: age, identity: identity, options: options) != nil
    }

    /// The rule itself, of an entry's age and whether it is the identity asked for.
    static func rule(age: TimeInterval, identity: Bool, options: CacheStore.PruneOptions) -> String? {
        if let user = options.userID, identity {
            return "identity \(user)"
        } else if options.olderThan != nil, age < -CachedFlow.clockSkew {
            // Its age cannot be known: a writer's clock ran ahead (docs/cache-format.md, "Time").
            return "resolved \(Int(-age))s in the future"
        } else if let limit = options.olderThan, age > limit {
            return "resolved \(Int(age))s ago"
        }
        return nil
    }
}

/// The files one prune removes, each once, in the order the rules chose them.
private struct PruneSelection {
    let store: CacheStore
    private(set) var scan: CacheScan
    /// The format of the entries `scan` holds.
    let entries: any FlowEntries
    let rule: PruneRule
    var options: CacheStore.PruneOptions { rule.options }
    var now: Date { rule.now }
    let removals = SpilledList<Removal>(inMemory: RemovalResult.rowsInMemory)
    /// The bytes of `removals`.
    private(set) var bytes: Int64 = 0
    /// How many of `removals` are records (`FlowEntries.removeRecords`' to remove).
    private(set) var records = 0
    /// Entries selected by age in a live writer's segment, left for the next prune.
    private(set) var deferred = 0
    /// The files chosen (not records: each of those is met once), so that none is listed twice.
    private var gone = Set<String>()

    init(store: CacheStore, scan: CacheScan, options: CacheStore.PruneOptions, now: Date) throws {
        self.store = store
        self.scan = scan
        entries = store.entries(of: scan)
        rule = PruneRule(options: options, now: now, live: scan.liveSegments, entries: entries)
    }

    private mutating func remove(_ kind: Removal.Kind, _ path: String, _ bytes: Int64, _ reason: String) throws {
        let record = entries.isRecord(path)
        guard record || gone.insert(path).inserted else { return }
        if record { records += 1 }
        self.bytes += bytes
        try removals.append(Removal(kind: kind, path: store.relative(path), bytes: bytes, reason: reason))
    }

    /// Superseded copies, and url files whose image was never written.
    mutating func addDebris() throws {
        for tree in scan.migrationLeftovers {
            try remove(.directory, tree, 0, "format 1's, left by a migration (its entries carried into the log)")
        }
        for file in scan.superseded { try remove(.superseded, file.path, file.size, "older copy of a key") }
        // Format 2's older records of a key: handed over by the walk (`walkFlows`).
        for dir in scan.emptyKeys { try remove(.directory, dir, 0, "key directory with no entry") }
        let imageDirs = Set(scan.images.map { PathName.parent(of: $0.path) })
        for urlFile in scan.imageURLFiles
        where !imageDirs.contains(PathName.parent(of: urlFile.path)) {
            try remove(.orphan, urlFile.path, urlFile.size, "url file without an image")
        }
        for temp in scan.temporaries where !CacheStore.writerAlive(temp.path) {
            try remove(.orphan, temp.path, temp.size, "temporary file of a writer that is gone")
        }
    }

    /// Walks the entries once: a format-2 cache's older records of a key
    /// (debris, always removed), and with `flows`, one identity's entries or
    /// entries resolved too long ago, then the aliases pointing at them.
    mutating func walkFlows() throws {
        // The selection, after the debris: waiting in a list of its own, as the debris is counted first.
        let selected = SpilledList<Removal>(inMemory: RemovalResult.rowsInMemory)
        var failure: (any Error)?
        // A segment's older records, counted: one row a segment, not one a record.
        var older: [String: (records: Int, bytes: Int64)] = [:]
        let rule = self.rule
        var deferred = 0
        scan.walk(
            where: { resolvedAt, userID in rule.selects(resolvedAt: resolvedAt, userID: userID) },
            flow: { entry, stored in
                guard failure == nil, rule.options.flows, let reason = rule.reason(entry) else { return }
                if rule.defers(entry.path) {
                    deferred += 1
                    return
                }
                do {
                    try selected.append(Removal(kind: .flow, path: entry.path, bytes: stored, reason: reason))
                } catch { failure = error }
            },
            superseded: { record in
                let segment = record.path.prefixBytes(before: UInt8(ascii: "#"))
                older[segment, default: (0, 0)].records += 1
                older[segment]?.bytes += record.size
            })
        if let failure { throw failure }
        self.deferred += deferred
        // A live writer's segment stays as it is (a compaction leaves it in place): its older records are not removed.
        for (segment, count) in older.sorted(by: { $0.key < $1.key }) where !rule.live.contains(segment) {
            let what = count.records == 1 ? "1 older record of a key" : "\(count.records) older records of keys"
            try remove(.superseded, segment, count.bytes, "\(what), dropped by a compaction")
        }
        try selected.each { try remove($0.kind, $0.path, $0.bytes, $0.reason) }
        guard options.flows else { return }
        for alias in scan.aliases {
            // The alias's key looked up alone (`FlowEntries.target`), not a set of every entry removed.
            if let target = entries.target(of: alias), rule.removes(target) {
                try remove(.alias, alias.path, alias.size, "points at a removed entry")
            }
        }
    }

    /// Expired or long-unused images, then the least recently used beyond the size limit.
    mutating func addImages() throws {
        var kept: [CachedImage] = []
        for image in scan.images {
            let unused = now.timeIntervalSince(image.lastAccess)
            if options.expired, image.isExpired(at: now, ttl: store.budgets.imageTTL) {
                try remove(.image, image.path, image.size, "expired")
            } else if let limit = options.olderThan, unused > limit {
                try remove(.image, image.path, image.size, "last used \(Int(unused))s ago")
            } else {
                kept.append(image)
            }
        }
        guard let budget = options.maxImageBytes else { return }
        var total = kept.reduce(0) { $0 + $1.size }
        for image in kept.sorted(by: { $0.lastAccess < $1.lastAccess }) where total > budget {
            try remove(.image, image.path, image.size, "least recently used over \(budget) bytes")
            total -= image.size
        }
    }

    /// Images and fonts that no flow surviving this prune refers to.
    mutating func addUnreferenced() throws {
        var images = Set<String>()
        var fonts = Set<String>()
        let (entries, rule) = (self.entries, self.rule)
        scan.walk { entry in
            // An entry this prune removes refers to nothing after it.
            guard !rule.removes(entry), let doc = entries.document(of: entry) else { return }
            images.formUnion(doc.allImages.map(CacheStore.urlHash))
            fonts.formUnion(doc.fonts.compactMap(\.sha256))
        }
        if options.images {
            for image in scan.images where !images.contains(image.urlHash) {
                try remove(.image, image.path, image.size, "no cached flow refers to it")
            }
        }
        for font in scan.fonts where !fonts.contains(String(PathName.lastComponent(of: font.path).prefix(64))) {
            try remove(.font, font.path, font.size, "no cached flow refers to it")
        }
    }
}
