import Foundation
import Synchronization

/// The cache directory the SDK keeps between launches (docs/cache-format.md):
/// flows keyed by (placement, identity fingerprint) with a last-known-good alias
/// per placement, images keyed by URL, fonts keyed by SHA-256.
///
/// Every file is immutable once published (see `AtomicFile`): a key's directory
/// holds its newest file and, for a moment after a write (or after a writer was
/// killed), older ones, which readers ignore and `prune` removes.
public final class CacheStore: Sendable {
    public static let format = "fpcache"
    /// The newest format this fpctl reads and writes.
    public static let formatVersion = 2
    public static let markerName = "fpcache.json"

    /// The format a new cache is made in: 1 (a file per entry) or 2 (a log of
    /// records and content-addressed flows), `FPCTL_CACHE_FORMAT` when set.
    public static let newCacheVersion: Int =
        ProcessInfo.processInfo.environment["FPCTL_CACHE_FORMAT"].flatMap(Int.init).map { min(max($0, 1), 2) } ?? 2

    public struct Budgets: Sendable {
        public var imageDiskBytes: Int64 = 200 << 20
        public var imageMemoryBytes: Int = 50 << 20
        public var imageTTL: TimeInterval = 7 * 86400
        public init() {}
    }

    public let root: String
    public let budgets: Budgets
    /// The directory's format version, from its marker.
    public let version: Int
    /// Format 2's flows, and this process's writing of them.
    let log: FlowLog
    let logWriter: FlowLog.Writer
    /// Format 2's identities waiting for `stage`'s writes, drained a batch at a time.
    let stageQueue = LoggedEntries.StageQueue()
    /// Flow objects read and validated (`objectDocument`).
    let objectDocuments = Mutex<[String: FlowDocument]>([:])
    /// Opened as format 1, and found since to be format 2 (`currentVersion`): a migration ran.
    let migratedSinceOpen = Atomic<Bool>(false)
    /// When `currentVersion` last read the marker.
    let versionChecked = Mutex<ContinuousClock.Instant?>(nil)
    let imageMemory = ImageMemoryCache()
    /// The image bytes on disk as last measured, plus this process's writes
    /// since (`enforceImageBudget`).
    let imageTotal = Mutex(ImageTally())

    /// The disk's image total as this process knows it: measured by a walk
    /// of `images/`, then kept up to date by its own writes until the next
    /// measure, which comes after `remeasureEvery` writes or `remeasureAfter`,
    /// so what other writers on the volume added is counted too.
    struct ImageTally {
        /// nil until first measured (and after a clear).
        var total: Int64?
        var writesSinceMeasure = 0
        var measuredAt = ContinuousClock.now
        static let remeasureEvery = 32
        static let remeasureAfter: Duration = .seconds(1)

        /// Whether the next write measures the disk again.
        var stale: Bool {
            total == nil || writesSinceMeasure >= Self.remeasureEvery
                || ContinuousClock.now - measuredAt >= Self.remeasureAfter
        }

        /// The disk measured now: `total` bytes.
        mutating func measured(_ total: Int64) {
            (self.total, writesSinceMeasure, measuredAt) = (total, 0, .now)
        }
    }

    var flowsDir: String { "\(root)/flows" }
    var aliasesDir: String { "\(root)/aliases" }
    var imagesDir: String { "\(root)/images" }
    var fontsDir: String { "\(root)/fonts" }
    var iconsDir: String { "\(root)/icons" }
    var lockPath: String { "\(root)/.lock" }

    /// Opens a cache directory. `create` makes a missing (or empty) one; otherwise
    /// a missing directory is `FPError.inputMissing` and a directory written by a
    /// newer format is refused, never rewritten.
    /// `newFormat`: the format a new cache is made in (default `newCacheVersion`).
    public init(root: String, create: Bool = false, budgets: Budgets = .init(), newFormat: Int? = nil) throws {
        self.root = root
        self.budgets = budgets
        var isDir: ObjCBool = false
        let fm = FileManager.default
        if !fm.fileExists(atPath: root, isDirectory: &isDir) {
            guard create else { throw FPError.inputMissing("\(root): no such cache directory") }
            // Synced into its parent (AtomicFile.makeDirectory), like every directory the cache makes.
            do { try AtomicFile.makeDirectory(root) } catch {
                throw FPError.cannotWrite("\(root): cannot create (\(error))")
            }
            FaultHook.reach("init-made-root")
        } else if !isDir.boolValue {
            throw FPError.invalid([.error("cache-format", root, "not a directory")])
        }
        version = try Self.openOrInitialize(
            root: root, create: create, newVersion: newFormat ?? Self.newCacheVersion,
            beforeListing: Self.initializationHook)
        log = FlowLog(root: root)
        logWriter = FlowLog.Writer(log: log)
    }

    /// Set by tests only: runs between finding no marker and listing the
    /// directory, where another process may initialize the cache.
    nonisolated(unsafe) static var initializationHook: (() -> Void)?

    /// Checks the marker, or publishes it in an empty directory. Many
    /// processes may do this at once on one new directory (pods starting
    /// together on a shared volume): the marker is the first thing any of
    /// them publishes, by a no-clobber `linkat`/`renameat2` of a complete
    /// file, so a directory that holds anything of the cache's holds the
    /// marker too, and two processes that both publish it write the same bytes.
    ///
    /// A directory that holds only names of the cache's layout but shows no
    /// marker is one another process is making, seen through a client that
    /// caches a missing name (NFS, FUSE's `negative_timeout`): a writer
    /// publishes the marker itself, and a name already taken means the other
    /// process's is there, which it then waits to see (`markerWait`). Names the
    /// file system makes at a volume's root (`lost+found`) count as nothing;
    /// any other name is refused at once.
    private static func openOrInitialize(
        root: String, create: Bool, newVersion: Int, beforeListing: (() -> Void)?
    ) throws -> Int {
        let marker = "\(root)/\(markerName)"
        if let version = try checkMarker(marker, root: root) { return version }
        try refuseDamagedMarker(marker, root: root)
        beforeListing?()
        // A directory that cannot be listed is not taken for an empty one.
        guard let listing = opendir(root) else {
            throw FPError.cannotWrite("\(root): cannot list it: \(Errno.describe(errno))")
        }
        closedir(listing)
        // A named temporary (where there is no O_TMPFILE) is another process's marker being written.
        let contents = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .filter { !$0.hasPrefix(AtomicFile.tempPrefix) && !isFileSystemName($0) }
        if contents.contains(where: { !layoutNames.contains($0) }) {
            // Another process may have published the marker since it was looked for.
            if let version = try checkMarker(marker, root: root) { return version }
            throw FPError.invalid([
                .error("cache-format", root, "not an fpctl cache (no \(markerName)); refusing to touch it")
            ])
        }
        guard create else {
            // Another process's cache, whose marker this client may not show yet.
            if contents.isEmpty { throw FPError.inputMissing("\(root): empty directory, not a cache yet") }
            if let version = try waitForMarker(marker, root: root) { return version }
            throw FPError.invalid([
                .error(
                    "cache-format", root,
                    "no \(markerName) beside the cache's folders after waiting \(Int(markerWait)) s: not an fpctl cache"
                )
            ])
        }
        let body = markerBody(version: newVersion)
        do {
            try AtomicFile.publish(body, directory: root, name: markerName, noReplace: true, faults: "init-marker")
        } catch let taken as AtomicFile.NameTaken {
            // Another process published it first: what it wrote must be a marker this fpctl reads.
            if let version = try checkMarker(marker, root: root) ?? waitForMarker(marker, root: root) {
                return version
            }
            // Still empty: a claim whose writer died before its rename. Every writer writes these
            // same bytes, so this one takes the name over.
            guard let info = try? FileManager.default.attributesOfItem(atPath: marker),
                (info[.size] as? Int) == 0
            else { throw FPError.cannotWrite(taken.description) }
            try AtomicFile.publish(body, directory: root, name: markerName)
        } catch {
            // A read-only or full volume: said at once (unless the marker came meanwhile).
            if let version = try checkMarker(marker, root: root) { return version }
            throw error
        }
        return newVersion
    }

    /// An empty marker is another process's claim of the name only while
    /// the cache is new: the marker is published before anything else, so
    /// beside any of the cache's folders an empty one is damage (a disk's,
    /// an editor's), said at once (65), never waited out.
    private static func refuseDamagedMarker(_ marker: String, root: String) throws {
        guard let damage = damagedMarker(root: root) else { return }
        throw FPError.invalid([.error(damage.finding.rule, marker, damage.finding.message)])
    }

    /// The cache's marker when it is damaged (empty, or not a marker, beside
    /// the cache's folders): the finding (`cache-corrupt-marker`, its path
    /// relative to the cache) and the version the folders say the cache is
    /// in, nil when they do not say (both formats' folders, or neither's).
    public static func damagedMarker(root: String) -> (finding: Finding, version: Int?)? {
        let marker = "\(root)/\(markerName)"
        var info = stat()
        guard lstat(marker, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        if info.st_size > 0, let data = FileManager.default.contents(atPath: marker),
            let json = try? JSONValue.parse(data), json["format"]?.stringValue == format
        {
            return nil
        }
        let present = layoutNames.subtracting([markerName, ".lock"]).sorted().filter {
            access("\(root)/\($0)", F_OK) == 0
        }
        guard let first = present.first else { return nil }
        let logged = present.contains("log") || present.contains("objects")
        let filed = present.contains("flows") || present.contains("aliases")
        let version: Int? = logged == filed ? (logged ? nil : newCacheVersion) : (logged ? 2 : 1)
        let how =
            version.map { "`fpctl cache verify --repair` writes it again (format \($0), as the folders say)" }
            ?? "its folders do not say which format it is (both formats' are there): restore it from a backup"
        let what = info.st_size == 0 ? "empty" : "not a cache marker"
        return (
            .error(
                "cache-corrupt-marker", markerName,
                "\(what), beside the cache's \(first)/: the marker is damaged; \(how)"), version
        )
    }

    /// Writes a damaged marker again (`cache verify --repair`), in the
    /// format the folders say; the finding it mended, nil when the marker
    /// is not damaged. Throws when the folders do not say the format.
    public static func mendMarker(root: String) throws -> Finding? {
        guard let damage = damagedMarker(root: root) else { return nil }
        guard let version = damage.version else { throw FPError.invalid([damage.finding]) }
        let lock = try Lock(path: "\(root)/.lock", exclusive: true)
        defer { lock.release() }
        try AtomicFile.write(markerBody(version: version), to: "\(root)/\(markerName)", overwrite: true)
        return damage.finding
    }

    /// The marker's bytes for a format version.
    static func markerBody(version: Int) -> Data {
        CanonicalJSON.prettyData(.object(["format": .string(format), "version": .number(Double(version))]))
    }

    /// Names a file system makes at the root of a new volume: `mkfs.ext4`'s
    /// `lost+found`. A volume's mount point holding only these is empty.
    static let fileSystemNames: Set<String> = ["lost+found"]

    /// Names the file system makes, never the cache's nor foreign to it:
    /// `lost+found` at a new volume's root, and anywhere the names NFS and
    /// FUSE give a file unlinked while a process holds it open (`.nfs…`,
    /// `.fuse_hidden…`), gone once it is closed. Never read, reported or removed.
    static func isFileSystemName(_ name: String) -> Bool {
        fileSystemNames.contains(name) || unlinkedWhileOpen(name)
    }

    /// The name NFS (`.nfs…`) or FUSE (`.fuse_hidden…`) gives a file unlinked while it is open.
    static func unlinkedWhileOpen(_ name: String) -> Bool {
        name.hasPrefix(".nfs") || name.hasPrefix(".fuse_hidden")
    }

    /// The names a cache's root holds besides the marker.
    static let layoutNames: Set<String> = [
        markerName, ".lock", "flows", "aliases", "images", "fonts", "icons", "log", "objects",
    ]

    /// How long a process that knows the marker exists (its own publish
    /// found the name taken, or the directory holds only the cache's
    /// names) waits for it to be readable: a client's cache of missing
    /// names lasts seconds (FUSE's `negative_timeout`; NFS's `acdirmax`, 60 s
    /// at most by default). Set by tests.
    nonisolated(unsafe) static var markerWait: TimeInterval = 60

    /// Looks for the marker again, backing off from 10 ms to 1 s, until
    /// `markerWait` has passed; its version once found.
    private static func waitForMarker(_ marker: String, root: String) throws -> Int? {
        let deadline = Date() + markerWait
        var pause: useconds_t = 10_000
        while Date() < deadline {
            if let version = try checkMarker(marker, root: root) { return version }
            usleep(pause)
            pause = min(pause * 2, 1_000_000)
        }
        return try checkMarker(marker, root: root)
    }

    /// The marker's version when it is there; throws when it is there but
    /// is not one this fpctl reads.
    private static func checkMarker(_ marker: String, root: String) throws -> Int? {
        // Empty: another process's claim of the name where there are no hard links, its marker
        // about to be renamed over it (Platform.publishNoReplace).
        guard let data = FileManager.default.contents(atPath: marker), !data.isEmpty else { return nil }
        guard let json = try? JSONValue.parse(data), json["format"]?.stringValue == format,
            let version = json["version"]?.numberValue
        else {
            throw FPError.invalid([.error("cache-format", marker, "not an fpctl cache marker")])
        }
        if version > Double(formatVersion) {
            throw FPError.invalid([
                .error(
                    "cache-format", root,
                    "cache format version \(CanonicalJSON.formatNumber(version)) is newer than this fpctl reads (\(formatVersion)); upgrade fpctl, the directory was left untouched"
                )
            ])
        }
        guard version >= 1, version == version.rounded() else {
            throw FPError.invalid([.error("cache-format", marker, "not an fpctl cache marker")])
        }
        return Int(version)
    }

    // MARK: Locking

    /// Writers hold the lock shared for one write, or from staging a batch
    /// until its group commit (`stage`); `prune`, `clear`, `verify`'s second
    /// pass and `--repair`, and the image-budget sweep hold it exclusively.
    /// Readers never lock (docs/cache-format.md, "Concurrency").
    /// `checked: false` skips the check that an exclusive lock keeps others
    /// out (the image budget's sweep, which a writer makes and which only
    /// removes what a reader takes for a miss).
    func withLock<T>(exclusive: Bool, checked: Bool = true, _ body: () throws -> T) throws -> T {
        let lock = try Lock(path: lockPath, exclusive: exclusive, checked: checked)
        defer { lock.release() }
        return try body()
    }

    /// The cache's lock held, for one call (`withLock`) or for a write that
    /// outlives one (an entry waiting for its group commit); `release` once.
    ///
    /// Shared holds of one lock file in this process share one descriptor
    /// (`sharedHolds`): the first opens and locks it, the last closes it, so
    /// a warm's batches in flight, which overlap, take it once rather than
    /// `open`, `flock` and `close` a batch. What other processes see is the
    /// same: the lock is held shared while any batch holds it.
    final class Lock: Sendable {
        private let descriptor: Int32
        /// The lock file, for a shared hold (released by counting down).
        private let sharedPath: String?
        /// A shared hold's tenure: the number of the descriptor it shares, the
        /// same for every hold from the `flock` that took it to the `close`
        /// that dropped it, and never given again in this process. While one
        /// tenure lasts no process can have held the lock exclusively, so
        /// nothing was removed: what a holder knew present early in it is
        /// present still (`FlowLog.storeObject`). nil for any other lock.
        let tenure: UInt64?

        /// Each lock file held shared by this process: its descriptor, how many holds share it, and its tenure.
        private static let sharedHolds = Mutex<[String: (descriptor: Int32, holds: Int, tenure: UInt64)]>([:])
        /// Tenures given so far.
        private static let tenures = Atomic<UInt64>(0)

        /// How many holds share `path`'s descriptor now (tests).
        static func sharedHoldCount(_ path: String) -> Int { sharedHolds.withLock { $0[path]?.holds ?? 0 } }

        /// `waiting: false` fails at once (`FPError.unavailable`) when another process holds a conflicting lock.
        init(path: String, exclusive: Bool, checked: Bool = true, waiting: Bool = true) throws {
            if !exclusive && waiting {
                (descriptor, tenure) = try Self.holdShared(path)
                sharedPath = path
                return
            }
            (sharedPath, tenure) = (nil, nil)
            // Read-only is enough for flock(2), so any uid that can read the
            // file can lock it; made with the umask's mode when missing.
            descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o666)
            guard descriptor >= 0 else { throw FPError.cannotWrite("\(path): \(Errno.describe(errno))") }
            while flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | (waiting ? 0 : LOCK_NB)) != 0 {
                if !waiting && errno == EWOULDBLOCK {
                    close(descriptor)
                    throw FPError.unavailable("\(path): held by another process")
                }
                guard errno == EINTR else {
                    let reason = Errno.describe(errno)
                    close(descriptor)
                    throw FPError.cannotWrite("\(path): \(reason)")
                }
            }
            // Deleting beside writers is safe only if the lock keeps them out: on a file system
            // whose flock succeeds but locks nothing (NFS mounted nolock across nodes, some FUSE
            // file systems), prune, clear and verify --repair refuse rather than race.
            if exclusive, checked, Self.conflicts(path: path, holding: descriptor, exclusive: true) == false {
                close(descriptor)
                let fileSystem = Platform.fileSystemType(of: path).map { " (\($0))" } ?? ""
                throw FPError.cannotWrite(
                    "\(path): file locks do nothing on this file system\(fileSystem), so deleting or migrating beside writers is not safe; run prune, clear, verify --repair and migrate on a mount whose locks work"
                )
            }
        }

        /// Whether a second descriptor's non-blocking lock of `path` fails
        /// while `descriptor` holds one (exclusive: a shared one must fail
        /// too; shared: an exclusive one must). nil when it cannot be asked.
        static func conflicts(path: String, holding descriptor: Int32, exclusive: Bool) -> Bool? {
            let second = open(path, O_RDONLY | O_CLOEXEC)
            guard second >= 0 else { return nil }
            defer { close(second) }
            if flock(second, (exclusive ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0 { return false }
            return errno == EWOULDBLOCK ? true : nil
        }

        /// Closing the descriptor drops the lock (a shared hold: the last one of its file closes it).
        func release() {
            guard let sharedPath else {
                close(descriptor)
                return
            }
            let last = Self.sharedHolds.withLock { holds -> Int32? in
                guard var held = holds[sharedPath] else { return nil }
                held.holds -= 1
                if held.holds > 0 {
                    holds[sharedPath] = held
                    return nil
                }
                holds[sharedPath] = nil
                return held.descriptor
            }
            if let last { close(last) }
        }

        /// One more shared hold of `path`: joins the descriptor held already,
        /// or opens and locks one (waiting outside the count's lock, so a
        /// release never waits for an exclusive holder elsewhere).
        private static func holdShared(_ path: String) throws -> (descriptor: Int32, tenure: UInt64) {
            func join() -> (Int32, UInt64)? {
                sharedHolds.withLock { holds in
                    guard var held = holds[path] else { return nil }
                    held.holds += 1
                    holds[path] = held
                    return (held.descriptor, held.tenure)
                }
            }
            if let held = join() { return held }
            // Read-only is enough for flock(2), so any uid that can read the
            // file can lock it; made with the umask's mode when missing.
            let descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o666)
            guard descriptor >= 0 else { throw FPError.cannotWrite("\(path): \(Errno.describe(errno))") }
            while flock(descriptor, LOCK_SH) != 0 {
                guard errno == EINTR else {
                    let reason = Errno.describe(errno)
                    close(descriptor)
                    throw FPError.cannotWrite("\(path): \(reason)")
                }
            }
            // Another thread may have taken it meanwhile: one descriptor stays, the other goes.
            let (kept, spare) = sharedHolds.withLock { holds -> ((Int32, UInt64), Int32?) in
                if var held = holds[path] {
                    held.holds += 1
                    holds[path] = held
                    return ((held.descriptor, held.tenure), descriptor)
                }
                let tenure = tenures.add(1, ordering: .relaxed).newValue
                holds[path] = (descriptor, 1, tenure)
                return ((descriptor, tenure), nil)
            }
            if let spare { close(spare) }
            return kept
        }
    }

    /// Whether the cache's lock works (`cache info`): a shared lock taken,
    /// a second descriptor's exclusive one must fail. nil when it cannot be
    /// told (no `.lock` and the directory read-only).
    public func locksWork() -> Bool? {
        let descriptor = open(lockPath, O_RDONLY | O_CREAT | O_CLOEXEC, 0o666)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_SH | LOCK_NB) == 0 else {
            // Held exclusively by a prune or a clear right now: locks work.
            return errno == EWOULDBLOCK ? true : nil
        }
        return Lock.conflicts(path: lockPath, holding: descriptor, exclusive: false)
    }

    /// Files in `directory` that are published entries (not temporaries), newest last.
    static func published(_ directory: String) -> [DirectoryWalker.Item] {
        (DirectoryWalker.list(directory, stat: false) ?? [])
            .filter { !$0.name.hasPrefix(".") && !$0.isDirectory }
            .sorted { $0.name < $1.name }
    }

    /// Removes the published files of a key directory whose names sort
    /// before `keep` (older stamps): never a newer one, which another writer
    /// of the same key may have just made durable (docs/cache-format.md,
    /// "Many writers"). Names sort by their stamps, so the newest name wins
    /// whatever order the writers finish in, and a key is never left empty.
    ///
    /// A file stamped beyond `CachedFlow.clockSkew` ahead of this clock (or
    /// of `keep`'s stamp, if later) goes too, though its name sorts after
    /// `keep`: its writer's clock ran ahead,
    /// and left there it would shadow every write until that time came.
    static func removeOlder(in directory: String, keeping keep: String) {
        let kept = CacheNames.parseStamp(keep.prefix(while: { $0 != "~" })) ?? .distantPast
        // The stamp's 14 digits only: every name of a later millisecond sorts after it.
        let future = String(CacheNames.stamp(max(Date(), kept) + CachedFlow.clockSkew).prefix(14))
        for item in published(directory) where item.name < keep || (item.name > future && item.name != keep) {
            unlink("\(directory)/\(item.name)")
        }
    }
}
