import Foundation

/// A format-2 cache's log as `CacheScan.walk` reads it.
struct LogWalk: Sendable {
    let log: FlowLog
    let survey: LogSurvey
    /// Whether a walk has added the aliases and problems to the scan.
    var walked = false
}

/// Everything in a cache directory, from one walk: names and `stat` only, never
/// file contents. What `cache info`, `list` and `prune` work from.
public struct CacheScan: Sendable {
    public struct Alias: Sendable {
        public let placement: String
        /// `<fingerprint>~<user>` of the entry it points at.
        public let target: String
        public let path: String
        public let size: Int64
        /// A record of a format-2 cache's log (`path` is `<cache>/log/<segment>#<offset>`).
        var inLog = false

        /// Its placement's directory name (`CacheNames.placement`: a long placement's hash).
        var placementDirectory: String {
            inLog ? CacheNames.placement(placement) : PathName.lastComponent(of: PathName.parent(of: path))
        }
        /// `<placement dir>/<fingerprint>~<user>`: the key directory it points at (`CachedFlow.directoryKey`).
        var directoryKey: String { placementDirectory + "/" + target }
    }

    public struct File: Sendable {
        public let path: String
        public let size: Int64
        public let mtime: Date
    }

    /// Format 1: the newest entry of every (placement, fingerprint) key.
    var treeFlows: [CachedFlow] = []
    /// Format 2: the log surveyed (which records a newer one supersedes),
    /// its entries read by each `walk`, never held.
    var logWalk: LogWalk?
    /// Older files of a key, left by a write in progress or a killed writer
    /// (format 2: older records of a key are handed to `walk` instead).
    public var superseded: [File] = []
    /// Each placement's alias (format 2: known once the log was walked).
    public var aliases: [Alias] = []
    public var images: [CachedImage] = []
    public var imageURLFiles: [File] = []
    public var fonts: [File] = []
    public var icons: [File] = []
    /// `.tmp-<pid>-…` files (only where O_TMPFILE is unavailable).
    public var temporaries: [File] = []
    /// Files and directories that are not part of the layout.
    public var foreign: [File] = []
    /// Key directories with no entry in them: what a write that failed
    /// (a full disk) leaves; `prune` and `verify --repair` remove them.
    public var emptyKeys: [String] = []
    /// Format 2: the segments and their indexes, the flows' objects, and
    /// what is wrong in a segment (a torn or corrupt record, after which
    /// nothing of it is read) or an index (damaged: lookups scan instead).
    public var segments: [File] = []
    public var objects: [File] = []
    public var logProblems: [(path: String, message: String, torn: Bool)] = []
    /// `flows/` and `aliases/` in a format-2 cache: what a migration had yet
    /// to remove (`FlowEntries.predecessors`). Not findings; `prune` carries
    /// their entries over and removes them. (A format-1 cache's `log/` and
    /// `objects/`, a migration's killed or in progress, are read as neither.)
    public var migrationLeftovers: [String] = []
    /// Whether the cache was read as format 2.
    public var logged = false

    /// Adds what another part of the walk found, after what this one holds.
    mutating func merge(_ other: CacheScan) {
        treeFlows += other.treeFlows
        superseded += other.superseded
        aliases += other.aliases
        images += other.images
        imageURLFiles += other.imageURLFiles
        fonts += other.fonts
        icons += other.icons
        temporaries += other.temporaries
        foreign += other.foreign
        emptyKeys += other.emptyKeys
        segments += other.segments
        objects += other.objects
        logProblems += other.logProblems
        migrationLeftovers += other.migrationLeftovers
    }

    /// The newest entry of every key, all at once: for a small cache (and
    /// tests); commands `walk`, which holds none of them.
    public var flows: [CachedFlow] {
        var copy = self
        var all: [CachedFlow] = []
        copy.walk { all.append($0) }
        return all.sorted { $0.path < $1.path }
    }

    /// Hands every key's newest entry to `flow` and, in format 2, every
    /// older record of a key to `superseded` (format 1's older files are in
    /// `superseded`), reading the log once, in storage order; the first walk
    /// of a format-2 cache adds its aliases to `aliases` and what is wrong in
    /// its segments to `logProblems`.
    public mutating func walk(flow: (CachedFlow) -> Void, superseded: ((File) -> Void)? = nil) {
        walk(where: { _, _ in true }, flow: { entry, _ in flow(entry) }, superseded: superseded)
    }

    /// As `walk(flow:superseded:)`, a format-2 entry made a `CachedFlow`
    /// only when `wanted` says so of its record's time and user id, read in
    /// place (`prune` asks of each entry, and removes few); format 1's entries
    /// are each handed to `flow`. With each, the bytes it takes on disk: a
    /// format-2 entry's record (its flow is shared, an object of its own),
    /// format 1's file.
    mutating func walk(
        where wanted: (_ resolvedAt: Date, _ userID: UnsafeRawBufferPointer) -> Bool,
        flow: (CachedFlow, _ stored: Int64) -> Void, superseded: ((File) -> Void)? = nil
    ) {
        guard logWalk != nil else {
            for entry in treeFlows { flow(entry, entry.size) }
            return
        }
        walkLog(
            entry: { segment, offset, length, view in
                guard wanted(LogRecord.date(millis: view.resolvedAtMillis), view.userID) else { return }
                flow(CacheStore.cachedFlow(view, path: "\(segment)#\(offset)"), Int64(length))
            },
            superseded: superseded.map { older in
                { path, length, view in
                    older(File(path: path, size: Int64(length), mtime: LogRecord.date(millis: view.resolvedAtMillis)))
                }
            })
    }

    /// What `cache info` counts of an entry, read without making its
    /// strings (format 2: from the record in place; format 1: its `CachedFlow`).
    public struct EntryFacts: ResolvedWithTTL {
        public let placement: String
        public let size: Int64
        public let resolvedAt: Date
        public let ttlSeconds: Int
    }

    /// As `walk(flow:)`, each entry's facts alone: a format-2 record's
    /// placement made a string once for a run of records of one placement.
    public mutating func walkFacts(_ body: (EntryFacts) -> Void) {
        guard logWalk != nil else {
            for entry in treeFlows {
                body(
                    EntryFacts(
                        placement: entry.placement, size: entry.size, resolvedAt: entry.resolvedAt,
                        ttlSeconds: entry.ttlSeconds))
            }
            return
        }
        var placements = RecentNames()
        walkLog(
            entry: { _, _, _, view in
                body(
                    EntryFacts(
                        placement: placements.name(view.placement), size: Int64(view.flowSize),
                        resolvedAt: LogRecord.date(millis: view.resolvedAtMillis), ttlSeconds: Int(view.ttlSeconds)))
            }, superseded: nil)
    }

    /// The last few names read from records, so that a run of records of a
    /// few placements makes each placement's string once, not once a record.
    struct RecentNames {
        private var names: [String] = []
        private var next = 0

        mutating func name(_ bytes: UnsafeRawBufferPointer) -> String {
            for name in names where name.sameBytes(as: bytes) { return name }
            let name = String(decoding: bytes, as: UTF8.self)
            if names.count < 8 { names.append(name) } else { names[next] = name }
            next = (next + 1) % 8
            return name
        }
    }

    /// The log's records, each surviving entry handed to `entry` with its
    /// segment's path and offset (its path `<segment>#<offset>`), each older
    /// record to `superseded`; aliases and problems kept by the first walk.
    private mutating func walkLog(
        entry: (_ segment: String, _ offset: Int, _ length: Int, LogRecord.View) -> Void,
        superseded: ((_ path: String, _ length: Int, LogRecord.View) -> Void)?
    ) {
        guard let logWalk else { return }
        var aliases: [Alias] = []
        let problems = logWalk.log.scan(logWalk.survey) { segment, offset, length, view, older in
            if older {
                superseded?("\(segment.path)#\(offset)", length, view)
                return
            }
            switch view.kind {
            case .entry: entry(segment.path, offset, length, view)
            case .alias:
                guard !logWalk.walked else { return }
                let record = view.record
                aliases.append(
                    Alias(
                        placement: record.placement,
                        target:
                            "\(record.fingerprint)~\(CacheNames.bounded(record.userID, max: CacheStore.maxNameField))",
                        path: "\(segment.path)#\(offset)", size: Int64(length), inLog: true))
            }
        }
        if !logWalk.walked {
            self.aliases += aliases.sorted { $0.path < $1.path }
            logProblems += problems
            self.logWalk?.walked = true
        }
    }

    /// Format 2: the segments whose writer still holds them (`LogSegment.isLive`).
    var liveSegments: Set<String> { Set(logWalk?.survey.parts.filter(\.live).map(\.segment.path) ?? []) }

    public var imageBytes: Int64 { images.reduce(0) { $0 + $1.size } }
    public var fontBytes: Int64 { fonts.reduce(0) { $0 + $1.size } }
}

extension CacheStore {
    /// One walk of the cache. A store opened as format 1 whose cache was
    /// migrated meanwhile walks it again as format 2.
    public func scan() -> CacheScan {
        let scan = scan(log: usesLog)
        return !usesLog && currentVersion() >= 2 ? self.scan(log: true) : scan
    }

    /// `scan()` for `cache list`: a format-2 log's superseded records
    /// decided from its segments' facts where they answer
    /// (`LogSurvey.decidedByFacts`), as `cache info` counts them, instead of
    /// by reading the records of every key written more than once.
    public func scanForListing() -> CacheScan {
        let scan = scan(log: usesLog, survey: .facts)
        return !usesLog && currentVersion() >= 2 ? self.scan(log: true, survey: .facts) : scan
    }

    /// `flows`: false leaves format 1's `flows/` out (a migration reads it
    /// in chunks, `walkFormatOneFlows`).
    func scan(log usesLog: Bool, flows: Bool = true, survey: LogSurvey.Mode = .records) -> CacheScan {
        var scan = CacheScan()
        scan.logged = usesLog
        let entries = entries(log: usesLog)
        for item in DirectoryWalker.list(root) ?? [] {
            // A writer's named temporary (no O_TMPFILE): the marker being made.
            if Self.classify(root, item, scan: &scan) { continue }
            // What the file system made at a volume's root (`lost+found`) is not the cache's, nor foreign to it.
            if item.isDirectory && Self.fileSystemNames.contains(item.name) { continue }
            switch item.name {
            case Self.markerName, ".lock": continue
            case let name where entries.directories.contains(name):
                entries.scan(name, into: &scan, flows: flows, survey: survey)
            // The format migrated from: what a migration had yet to remove, for `prune` to carry over and remove.
            case let name where entries.predecessors.contains(name):
                scan.migrationLeftovers.append("\(root)/\(item.name)")
            // The format migrated to: a migration's work in progress (killed, or running), neither foreign nor ours.
            case let name where FileEntries.names.contains(name) || LoggedEntries.names.contains(name): continue
            case "images": scanImageDirs(into: &scan)
            case "fonts": scan.fonts = scanFlat(fontsDir, scan: &scan)
            case "icons": scan.icons = scanFlat(iconsDir, scan: &scan)
            default: scan.foreign.append(.init(path: "\(root)/\(item.name)", size: item.size, mtime: item.mtime))
            }
        }
        return scan
    }

    private static func classify(_ dir: String, _ item: DirectoryWalker.Item, scan: inout CacheScan) -> Bool {
        // A file unlinked while open, as NFS or FUSE names it until it is closed: the file system's.
        if CacheStore.unlinkedWhileOpen(item.name) { return true }
        let file = CacheScan.File(path: "\(dir)/\(item.name)", size: item.size, mtime: item.mtime)
        // `.tmp-…`, or the marker's own (`.fpcache.json.tmp-<pid>-…`: its replacement by a migration or a repair).
        if item.name.hasPrefix(AtomicFile.tempPrefix) || item.name.hasPrefix(Self.markerTemporaryPrefix) {
            scan.temporaries.append(file)
            return true
        }
        return false
    }

    /// What a replacement of the marker (`AtomicFile.write`) writes first.
    static let markerTemporaryPrefix = ".\(markerName).tmp-"

    /// Placement directories one by one, then every key directory, spread over
    /// the cores (the walk is one `getdents` and a `stat` per entry file: the sizes
    /// are not in the names).
    func scanFlows(into scan: inout CacheScan) {
        var keyDirs: [(placement: String, dir: String, name: String)] = []
        for p in DirectoryWalker.list(flowsDir, stat: false) ?? [] {
            // A writer's temporaries are debris or work in progress at any depth, never foreign.
            if Self.classify(flowsDir, p, scan: &scan) { continue }
            let pdir = "\(flowsDir)/\(p.name)"
            guard p.isDirectory, let placement = CacheNames.decode(Substring(p.name)) else {
                scan.foreign.append(.init(path: pdir, size: 0, mtime: .distantPast))
                continue
            }
            for k in DirectoryWalker.list(pdir, stat: false) ?? [] {
                if Self.classify(pdir, k, scan: &scan) { continue }
                let kdir = "\(pdir)/\(k.name)"
                guard k.isDirectory else {
                    scan.foreign.append(.init(path: kdir, size: 0, mtime: .distantPast))
                    continue
                }
                keyDirs.append((placement, kdir, k.name))
            }
        }
        for part in Parallel.mapSlices(
            keyDirs,
            { slice in
                var part = CacheScan()
                for key in slice { Self.scanKey(placement: key.placement, dir: key.dir, name: key.name, into: &part) }
                return part
            })
        {
            scan.merge(part)
        }
    }

    /// Format 1's entries (each key directory's newest), handed to `body`
    /// `chunk` at a time as `readdir` reads the key directories, each chunk's
    /// directories read across the cores: memory holds one chunk, not the
    /// listing (a migration of a million entries).
    func walkFormatOneFlows(chunk: Int, _ body: ([CachedFlow]) throws -> Void) throws {
        var keyDirs: [(placement: String, dir: String, name: String)] = []
        func flush() throws {
            guard !keyDirs.isEmpty else { return }
            var flows: [CachedFlow] = []
            for part in Parallel.mapSlices(
                keyDirs,
                { slice in
                    var part = CacheScan()
                    for key in slice {
                        Self.scanKey(placement: key.placement, dir: key.dir, name: key.name, into: &part)
                    }
                    return part
                })
            {
                flows += part.treeFlows
            }
            keyDirs.removeAll(keepingCapacity: true)
            try body(flows)
        }
        for p in DirectoryWalker.list(flowsDir, stat: false) ?? [] {
            let pdir = "\(flowsDir)/\(p.name)"
            guard p.isDirectory, !p.name.hasPrefix("."), let placement = CacheNames.decode(Substring(p.name)) else {
                continue
            }
            try DirectoryWalker.forEach(pdir, stat: false) { k in
                guard k.isDirectory, !k.name.hasPrefix(".") else { return }
                keyDirs.append((placement, "\(pdir)/\(k.name)", k.name))
                if keyDirs.count >= chunk { try flush() }
            }
        }
        try flush()
    }

    /// One key directory: its newest entry, and the older files beside it.
    private static func scanKey(placement: String, dir kdir: String, name: String, into scan: inout CacheScan) {
        var entries: [CachedFlow] = []
        guard let items = DirectoryWalker.list(kdir) else { return }
        if items.isEmpty { scan.emptyKeys.append(kdir) }
        for f in items {
            if classify(kdir, f, scan: &scan) { continue }
            let path = "\(kdir)/\(f.name)"
            if let e = parseEntryName(placement: placement, keyDir: name, name: f.name, size: f.size, path: path) {
                entries.append(e)
            } else {
                scan.foreign.append(.init(path: path, size: f.size, mtime: f.mtime))
            }
        }
        entries.sort { $0.path < $1.path }
        // A name whose fields were too long to carry their values: the newest entry's JSON has them.
        if let newest = entries.popLast() { scan.treeFlows.append(newest.withFullValues()) }
        scan.superseded += entries.map { .init(path: $0.path, size: $0.size, mtime: $0.resolvedAt) }
    }

    func scanAliases(into scan: inout CacheScan) {
        for p in DirectoryWalker.list(aliasesDir, stat: false) ?? [] {
            if Self.classify(aliasesDir, p, scan: &scan) { continue }
            let pdir = "\(aliasesDir)/\(p.name)"
            guard p.isDirectory, let placement = CacheNames.decode(Substring(p.name)) else {
                scan.foreign.append(.init(path: pdir, size: 0, mtime: .distantPast))
                continue
            }
            var found: [CacheScan.Alias] = []
            for f in DirectoryWalker.list(pdir) ?? [] {
                if Self.classify(pdir, f, scan: &scan) { continue }
                let parts = f.name.split(separator: "~", maxSplits: 2)
                guard parts.count == 3 else {
                    scan.foreign.append(.init(path: "\(pdir)/\(f.name)", size: f.size, mtime: f.mtime))
                    continue
                }
                found.append(
                    .init(placement: placement, target: String(parts[2]), path: "\(pdir)/\(f.name)", size: f.size))
            }
            found.sort { $0.path < $1.path }
            if let newest = found.popLast() { scan.aliases.append(newest) }
            scan.superseded += found.map { .init(path: $0.path, size: $0.size, mtime: .distantPast) }
        }
    }

    /// One pass over `images/`: the newest `.img` of each URL, its `url` file, and
    /// anything else (older copies, debris, foreign files); the URL directories
    /// spread over the cores.
    func scanImageDirs(into scan: inout CacheScan) {
        var dirs: [String] = []
        for dir in DirectoryWalker.list(imagesDir, stat: false) ?? [] {
            // An image being downloaded where there is no O_TMPFILE (`CacheStore.imageWriter`).
            if Self.classify(imagesDir, dir, scan: &scan) { continue }
            let d = "\(imagesDir)/\(dir.name)"
            guard dir.isDirectory, dir.name.count == 64 else {
                scan.foreign.append(.init(path: d, size: 0, mtime: .distantPast))
                continue
            }
            dirs.append(dir.name)
        }
        let imagesDir = self.imagesDir
        for part in Parallel.mapSlices(
            dirs,
            { slice in
                var part = CacheScan()
                for name in slice { Self.scanImageDir(imagesDir, name, into: &part) }
                return part
            })
        {
            scan.merge(part)
        }
    }

    private static func scanImageDir(_ imagesDir: String, _ name: String, into scan: inout CacheScan) {
        let d = "\(imagesDir)/\(name)"
        var copies: [(item: DirectoryWalker.Item, downloadedAt: Date)] = []
        for item in DirectoryWalker.list(d) ?? [] {
            if classify(d, item, scan: &scan) { continue }
            if item.name == CacheStore.imageURLFileName {
                scan.imageURLFiles.append(
                    .init(path: "\(d)/\(CacheStore.imageURLFileName)", size: item.size, mtime: item.mtime))
            } else if item.name.hasSuffix(".img"), let stamp = CacheNames.parseStamp(item.name.prefix(14)) {
                copies.append((item, stamp))
            } else {
                scan.foreign.append(.init(path: "\(d)/\(item.name)", size: item.size, mtime: item.mtime))
            }
        }
        copies.sort { $0.item.name < $1.item.name }
        guard let (newest, downloadedAt) = copies.popLast() else { return }
        scan.images.append(
            CachedImage(
                urlHash: name, downloadedAt: downloadedAt, lastAccess: newest.mtime, size: newest.size,
                path: "\(d)/\(newest.name)"))
        scan.superseded += copies.map { .init(path: "\(d)/\($0.item.name)", size: $0.item.size, mtime: $0.item.mtime) }
    }

    private func scanFlat(_ dir: String, scan: inout CacheScan) -> [CacheScan.File] {
        var list: [CacheScan.File] = []
        for item in DirectoryWalker.list(dir) ?? [] {
            if Self.classify(dir, item, scan: &scan) { continue }
            list.append(.init(path: "\(dir)/\(item.name)", size: item.size, mtime: item.mtime))
        }
        return list
    }
}

extension CacheScan {
    /// Which entries a listing keeps, by their freshness at a given time.
    public enum Freshness: Sendable {
        case fresh, stale
    }

    /// The flow entries of one placement and user id (nil: any) and, when
    /// given, of one freshness at `now`; by placement, then oldest first (then
    /// by fingerprint: the same order in either format, on any file system).
    public func flows(placement: String?, userID: String?, freshness: Freshness?, at now: Date) -> [CachedFlow] {
        var copy = self
        var found: [CachedFlow] = []
        copy.walk { entry in
            if Self.selects(entry, placement: placement, userID: userID, freshness: freshness, at: now) {
                found.append(entry)
            }
        }
        return found.sorted(by: Self.listed)
    }

    /// Entries a listing sorts in memory before it spills to a temporary file.
    public static let defaultRunLength = SortedListing.defaultRunLength

    /// `flows(placement:userID:freshness:at:)` handed to `body` one by one,
    /// in memory that does not grow with the cache: sorted in batches,
    /// merged from a temporary file past one batch (`SortedListing`).
    public func forEachFlow(
        placement: String?, userID: String?, freshness: Freshness?, at now: Date,
        runLength: Int = CacheScan.defaultRunLength,
        spillDirectory: String? = nil, _ body: (CachedFlow) throws -> Void
    ) throws {
        try forEachFlow(
            placement: placement, userID: userID, freshness: freshness, at: now, runLength: runLength,
            spillDirectory: spillDirectory, batch: 4_096
        ) { batch in
            for index in 0..<batch.count {
                if let entry = batch.entry(index) { try body(entry) }
            }
        }
    }

    /// `forEachFlow`'s entries, in its order, handed on `batch` at a time as
    /// `ListedBatch`es, whose strings are made by whoever takes them (`cache
    /// list` makes them on every core as it renders them).
    public func forEachFlow(
        placement: String?, userID: String?, freshness: Freshness?, at now: Date,
        runLength: Int = CacheScan.defaultRunLength, spillDirectory: String? = nil, batch: Int,
        _ body: (ListedBatch) throws -> Void
    ) throws {
        var copy = self
        var sorted = SortedListing(runLength: runLength, directory: spillDirectory)
        var failure: (any Error)?
        guard logWalk != nil else {
            for entry in treeFlows
            where Self.selects(entry, placement: placement, userID: userID, freshness: freshness, at: now) {
                try sorted.add(entry)
            }
            try sorted.finish(batch: batch, body)
            return
        }
        // Format 2: each record chosen and held as it is read, its strings made once, when handed on.
        copy.walkLog(
            entry: { segment, offset, _, view in
                guard failure == nil,
                    placement.map({ $0.sameBytes(as: view.placement) }) ?? true,
                    userID.map({ $0.sameBytes(as: view.userID) }) ?? true,
                    freshness.map({
                        CachedFlow.isFresh(
                            resolvedAt: LogRecord.date(millis: view.resolvedAtMillis),
                            ttlSeconds: Int(view.ttlSeconds), at: now) == ($0 == .fresh)
                    }) ?? true
                else { return }
                do { try sorted.add(view, segment: segment, offset: offset) } catch { failure = error }
            }, superseded: nil)
        if let failure { throw failure }
        try sorted.finish(batch: batch, body)
    }

    /// Whether a listing of one placement, user id and freshness shows `entry`.
    public static func selects(
        _ entry: CachedFlow, placement: String?, userID: String?, freshness: Freshness?, at now: Date
    ) -> Bool {
        (placement.map { entry.placement.sameBytes(as: $0) } ?? true)
            && (userID == nil || entry.userID.sameBytes(as: userID))
            && (freshness == nil || entry.isFresh(at: now) == (freshness == .fresh))
    }

    /// A listing's order: by placement, then oldest first, then by
    /// fingerprint and user id; names by their UTF-8 bytes (`ExactName`), so
    /// two spellings of one name that `String`'s `<` calls equal (NFC and
    /// NFD) are two placements, each listed whole, never interleaved.
    public static func listed(_ a: CachedFlow, _ b: CachedFlow) -> Bool {
        if !a.placement.sameBytes(as: b.placement) { return ExactName(a.placement) < ExactName(b.placement) }
        if a.resolvedAt != b.resolvedAt { return a.resolvedAt < b.resolvedAt }
        if !a.fingerprint.sameBytes(as: b.fingerprint) { return ExactName(a.fingerprint) < ExactName(b.fingerprint) }
        return ExactName(a.userID ?? "") < ExactName(b.userID ?? "")
    }
}
