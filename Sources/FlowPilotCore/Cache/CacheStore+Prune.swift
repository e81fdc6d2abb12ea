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
    public func prune(_ o: PruneOptions) throws -> RemovalResult {
        let work = { () -> RemovalResult in
            var selection = PruneSelection(store: self, scan: self.scan(), options: o, now: o.now ?? Date())
            selection.addDebris()
            selection.walkFlows()
            let scan = selection.scan
            if o.images { selection.addImages() }
            if o.unreferenced { selection.addUnreferenced() }
            if o.dryRun {
                return RemovalResult(removed: selection.removals, failed: [], deferred: selection.deferred)
            }
            guard scan.logged else { return self.delete(selection.removals) }
            if !scan.migrationLeftovers.isEmpty {
                // Carried into the log first, never deleted; a failure (a full disk) leaves them for the next.
                _ = try? self.carryOverFormatOneTrees()
            }
            let (records, files) = (
                selection.removals.filter { self.isLogged("\(self.root)/\($0.path)") },
                selection.removals.filter { !self.isLogged("\(self.root)/\($0.path)") }
            )
            let logged = self.deleteLogged(records, scan: scan)
            let unlinked = self.delete(files)
            return RemovalResult(
                removed: logged.removed + unlinked.removed, failed: logged.failed + unlinked.failed,
                deferred: selection.deferred)
        }
        return o.dryRun ? work() : try withLock(exclusive: true, work)
    }

    /// Unlinks each removal, and the directory it leaves empty; reports only
    /// what was really removed (a file already gone counts as removed).
    private func delete(_ removals: [Removal]) -> RemovalResult {
        var removed: [Removal] = []
        var failed: [RemovalResult.Failure] = []
        for removal in removals {
            let path = "\(root)/\(removal.path)"
            let gone = removal.kind == .directory ? rmdir(path) == 0 : unlink(path) == 0
            guard gone || errno == ENOENT else {
                failed.append(.init(removal: removal, reason: Errno.describe(errno)))
                continue
            }
            removed.append(removal)
            if removal.kind == .directory { continue }
            let dir = PathName.parent(of: path)
            if removal.kind == .image { Self.removeImageDirIfEmpty(path) } else if dir != fontsDir { rmdir(dir) }
        }
        return RemovalResult(removed: removed, failed: failed)
    }
}

/// What `prune` removed (with `dryRun`, would remove), and what it could not.
public struct RemovalResult: Sendable {
    public struct Failure: Sendable {
        public let removal: Removal
        public let reason: String
    }

    public let removed: [Removal]
    public let failed: [Failure]
    /// Format 2: entries older than `--older-than` in a segment a writer is
    /// still appending to (docs/cache-format.md, "Compaction"), left for the
    /// next prune: not removed, and no failure.
    public var deferred = 0

    init(removed: [Removal], failed: [Failure], deferred: Int = 0) {
        (self.removed, self.failed, self.deferred) = (removed, failed, deferred)
    }
}

/// The files one prune removes, each once, in the order the rules chose them.
private struct PruneSelection {
    let store: CacheStore
    private(set) var scan: CacheScan
    let options: CacheStore.PruneOptions
    let now: Date
    private(set) var removals: [Removal] = []
    /// Entries selected by age in a live writer's segment, left for the next prune.
    private(set) var deferred = 0
    private var gone = Set<String>()

    init(store: CacheStore, scan: CacheScan, options: CacheStore.PruneOptions, now: Date) {
        self.store = store
        self.scan = scan
        self.options = options
        self.now = now
    }

    private mutating func remove(_ kind: Removal.Kind, _ path: String, _ bytes: Int64, _ reason: String) {
        guard gone.insert(path).inserted else { return }
        removals.append(Removal(kind: kind, path: store.relative(path), bytes: bytes, reason: reason))
    }

    /// Superseded copies, and url files whose image was never written.
    mutating func addDebris() {
        if scan.logged {
            for tree in scan.migrationLeftovers {
                remove(.directory, tree, 0, "format 1's, left by a migration (its entries carried into the log)")
            }
        }
        for file in scan.superseded { remove(.superseded, file.path, file.size, "older copy of a key") }
        // Format 2's older records of a key: handed over by the walk (`walkFlows`).
        for dir in scan.emptyKeys { remove(.directory, dir, 0, "key directory with no entry") }
        let imageDirs = Set(scan.images.map { PathName.parent(of: $0.path) })
        for urlFile in scan.imageURLFiles
        where !imageDirs.contains(PathName.parent(of: urlFile.path)) {
            remove(.orphan, urlFile.path, urlFile.size, "url file without an image")
        }
        for temp in scan.temporaries where !CacheStore.writerAlive(temp.path) {
            remove(.orphan, temp.path, temp.size, "temporary file of a writer that is gone")
        }
    }

    /// Walks the entries once: a format-2 cache's older records of a key
    /// (debris, always removed), and with `flows`, one identity's entries or
    /// entries resolved too long ago, then the aliases pointing at them.
    mutating func walkFlows() {
        var removedKeys = Set<String>()
        var selected: [(CachedFlow, String)] = []
        // A segment's older records, counted: one row a segment, not one a record.
        var older: [String: (records: Int, bytes: Int64)] = [:]
        let (options, now) = (self.options, self.now)
        // Gathered by the walk (the selection and the debris, not every entry), removed in the walk's order.
        scan.walk(
            where: { resolvedAt, userID in
                // The same rule, of a format-2 record in place: most are kept, and made nothing.
                options.flows
                    && Self.rule(
                        age: now.timeIntervalSince(resolvedAt),
                        identity: options.userID.map { $0.sameBytes(as: userID) } ?? false, options: options) != nil
            },
            flow: { entry in
                guard options.flows, let reason = Self.reason(entry, options: options, now: now) else { return }
                selected.append((entry, reason))
            },
            superseded: { record in
                let segment = String(record.path.prefix { $0 != "#" })
                older[segment, default: (0, 0)].records += 1
                older[segment]?.bytes += record.size
            })
        // A live writer's segment stays as it is (a compaction leaves it in place): its older records are not removed.
        let live = scan.liveSegments
        for (segment, count) in older.sorted(by: { $0.key < $1.key }) where !live.contains(segment) {
            let what = count.records == 1 ? "1 older record of a key" : "\(count.records) older records of keys"
            remove(.superseded, segment, count.bytes, "\(what), dropped by a compaction")
        }
        for (entry, reason) in selected {
            // By age, in a live writer's segment: for the next prune (one identity's entries are asked for
            // by name, so those are tried, and a failure if they stay).
            if options.userID == nil, live.contains(String(entry.path.prefix { $0 != "#" })) {
                deferred += 1
                continue
            }
            remove(.flow, entry.path, entry.size, reason)
            removedKeys.insert(entry.directoryKey)
        }
        guard options.flows else { return }
        for alias in scan.aliases {
            // Format 2: the alias's key looked up alone, not a set of every entry removed.
            let removed =
                alias.inLog ? aliasTargetRemoved(alias) : removedKeys.contains(alias.directoryKey)
            if removed { remove(.alias, alias.path, alias.size, "points at a removed entry") }
        }
    }

    /// Why `options` remove an entry, nil when they keep it.
    private static func reason(_ entry: CachedFlow, options: CacheStore.PruneOptions, now: Date) -> String? {
        // Format 1 knows the user id by its key directory's name (`<fingerprint>~<user>/`).
        let identity =
            options.userID.map { user in
                entry.inLog
                    ? entry.userID.sameBytes(as: user)
                    : entry.path.containsBytes("~" + CacheNames.bounded(user, max: CacheStore.maxNameField) + "/")
            } ?? false
        return rule(age: entry.age(at: now), identity: identity, options: options)
    }

    /// The rule itself, of an entry's age and whether it is the identity asked for.
    private static func rule(age: TimeInterval, identity: Bool, options: CacheStore.PruneOptions) -> String? {
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

    /// Whether the entry a format-2 alias points at (its key's survivor) is one this prune removes.
    private func aliasTargetRemoved(_ alias: CacheScan.Alias) -> Bool {
        let fingerprint = String(alias.target.prefix { $0 != "~" })
        var servable = FlowLog.Servable(store.log)
        guard
            let survivor = try? store.log.survivor(
                of: .entry(placement: alias.placement, fingerprint: fingerprint), in: store.log.segments(),
                servable: &servable)
        else { return false }
        return gone.contains(survivor.path)
    }

    /// Expired or long-unused images, then the least recently used beyond the size limit.
    mutating func addImages() {
        var kept: [CachedImage] = []
        for image in scan.images {
            let unused = now.timeIntervalSince(image.lastAccess)
            if options.expired, image.isExpired(at: now, ttl: store.budgets.imageTTL) {
                remove(.image, image.path, image.size, "expired")
            } else if let limit = options.olderThan, unused > limit {
                remove(.image, image.path, image.size, "last used \(Int(unused))s ago")
            } else {
                kept.append(image)
            }
        }
        guard let budget = options.maxImageBytes else { return }
        var total = kept.reduce(0) { $0 + $1.size }
        for image in kept.sorted(by: { $0.lastAccess < $1.lastAccess }) where total > budget {
            remove(.image, image.path, image.size, "least recently used over \(budget) bytes")
            total -= image.size
        }
    }

    /// Images and fonts that no flow surviving this prune refers to.
    mutating func addUnreferenced() {
        var images = Set<String>()
        var fonts = Set<String>()
        let (store, gone) = (self.store, self.gone)
        scan.walk { entry in
            guard !gone.contains(entry.path) else { return }
            let document = entry.inLog ? store.loggedDocument(entry) : CacheStore.readEntry(entry)?.0
            guard let doc = document else { return }
            images.formUnion(doc.allImages.map(CacheStore.urlHash))
            fonts.formUnion(doc.fonts.compactMap(\.sha256))
        }
        if options.images {
            for image in scan.images where !images.contains(image.urlHash) {
                remove(.image, image.path, image.size, "no cached flow refers to it")
            }
        }
        for font in scan.fonts where !fonts.contains(String(PathName.lastComponent(of: font.path).prefix(64))) {
            remove(.font, font.path, font.size, "no cached flow refers to it")
        }
    }
}
