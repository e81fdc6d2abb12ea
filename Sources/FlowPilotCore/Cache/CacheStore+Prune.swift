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
            let scan = self.scan()
            var selection = PruneSelection(store: self, scan: scan, options: o, now: o.now ?? Date())
            selection.addDebris()
            if o.flows { selection.addFlows() }
            if o.images { selection.addImages() }
            if o.unreferenced { selection.addUnreferenced() }
            if o.dryRun { return RemovalResult(removed: selection.removals, failed: []) }
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
            return RemovalResult(removed: logged.removed + unlinked.removed, failed: logged.failed + unlinked.failed)
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
}

/// The files one prune removes, each once, in the order the rules chose them.
private struct PruneSelection {
    let store: CacheStore
    let scan: CacheScan
    let options: CacheStore.PruneOptions
    let now: Date
    private(set) var removals: [Removal] = []
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

    /// One identity's entries, or entries resolved too long ago, and the aliases pointing at them.
    mutating func addFlows() {
        var removedKeys = Set<String>()
        let userSuffix = options.userID.map { "~" + CacheNames.bounded($0, max: CacheStore.maxNameField) + "/" }
        for entry in scan.flows {
            let age = entry.age(at: now)
            if let user = options.userID,
                entry.inLog ? entry.userID.sameBytes(as: user) : userSuffix.map(entry.path.contains) == true
            {
                remove(.flow, entry.path, entry.size, "identity \(user)")
            } else if options.olderThan != nil, entry.isFromFuture(at: now) {
                // Its age cannot be known: a writer's clock ran ahead (docs/cache-format.md, "Time").
                remove(.flow, entry.path, entry.size, "resolved \(Int(-age))s in the future")
            } else if let limit = options.olderThan, age > limit {
                remove(.flow, entry.path, entry.size, "resolved \(Int(age))s ago")
            } else {
                continue
            }
            removedKeys.insert(entry.directoryKey)
        }
        for alias in scan.aliases where removedKeys.contains(alias.directoryKey) {
            remove(.alias, alias.path, alias.size, "points at a removed entry")
        }
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
        for entry in scan.flows where !gone.contains(entry.path) {
            let document = entry.inLog ? store.loggedDocument(entry) : CacheStore.readEntry(entry)?.0
            guard let doc = document else { continue }
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
