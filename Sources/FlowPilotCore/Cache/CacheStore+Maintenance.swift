import Foundation

/// One file `prune` or `clear` removes (or, with `--dry-run`, would remove).
public struct Removal: Sendable, Codable {
    /// What a removed file was.
    public enum Kind: String, Sendable, Codable {
        case flow, alias, image, font
        /// An older copy of a key that readers already ignore.
        case superseded
        /// An image's url file without its image (a writer killed between the two).
        case orphan
        /// A key directory with no entry (a write that failed on a full disk).
        case directory
    }

    public let kind: Kind
    public let path: String
    public let bytes: Int64
    public let reason: String
}

extension CacheStore {
    // MARK: Verify

    /// What `verify` found, and with `repair` what it could not remove.
    public struct Verification: Sendable {
        public let findings: [Finding]
        /// The findings' paths (relative to the cache) that `repair` could
        /// not remove, and why; every other finding's file is gone.
        public let notRemoved: [String: String]

        public init(findings: [Finding], notRemoved: [String: String]) {
            (self.findings, self.notRemoved) = (findings, notRemoved)
        }
    }

    /// Reads every entry and checks it; one finding per problem (rule ids
    /// `cache-corrupt-entry`, `cache-future-entry`, `cache-dangling-alias`,
    /// `cache-font-hash`, `cache-image-url`, `cache-temp-debris`,
    /// `cache-foreign-file`). With `repair`, removes
    /// exactly the files the findings name, nothing else, and says which it
    /// could not remove.
    ///
    /// Writers may be at work meanwhile (docs/cache-format.md, "Many
    /// writers"): a file replaced while it was read is not a finding. The
    /// first pass runs beside them; only when it finds something is the
    /// cache checked again under the exclusive lock (no write in progress,
    /// none starting), and that pass's findings are the answer and what
    /// `repair` removes, under the same lock. Where the lock cannot be had
    /// (a read-only cache without a `.lock`), a finding is reported only when
    /// a second pass finds it too.
    /// `now` (`FPCTL_NOW`) is what entries from the future are judged
    /// against; nil: the clock as each pass starts, so entries written while
    /// verify waited for the lock are not taken for entries from the future.
    public func verify(repair: Bool, now: Date? = nil) throws -> Verification {
        let first = inspectAll(now: now ?? Date())
        if first.findings.isEmpty { return Verification(findings: [], notRemoved: [:]) }
        let lock: Lock
        do { lock = try Lock(path: lockPath, exclusive: true) } catch {
            if repair { throw error }
            let second = inspectAll(now: now ?? Date())
            let seen = Set(first.findings.map { "\($0.rule)\u{0}\($0.path)" })
            return Verification(
                findings: second.findings.filter { seen.contains("\($0.rule)\u{0}\($0.path)") }, notRemoved: [:])
        }
        defer { lock.release() }
        let (findings, broken, entries) = inspectAll(now: now ?? Date())
        var notRemoved: [String: String] = [:]
        if repair && !broken.isEmpty {
            // Records and the segments holding them (format 2) are repaired by rewriting them without
            // those named (and a segment's torn or corrupt bytes); files are unlinked.
            let records = broken.filter(entries.isRecord)
            if !records.isEmpty {
                let dropped = Set(records)
                do { _ = try entries.removeRecords { _, path in dropped.contains(path) } } catch {
                    for path in records { notRemoved[relative(path)] = "\(error)" }
                }
            }
            for path in broken where !entries.isRecord(path) {
                if unlink(path) == 0 || errno == ENOENT { continue }
                // A foreign directory goes whole: it is what the finding names.
                if errno == EISDIR, (try? FileManager.default.removeItem(atPath: path)) != nil { continue }
                notRemoved[relative(path)] = Errno.describe(errno)
            }
            try? AtomicFile.syncDirectory(root)
        }
        return Verification(findings: findings, notRemoved: notRemoved)
    }

    /// One pass of `verify`: the findings, the paths they name, and the format of the entries it read.
    private func inspectAll(now: Date) -> (findings: [Finding], broken: [String], entries: any FlowEntries) {
        var scan = scan()
        let entries = entries(of: scan)
        var findings: [Finding] = []
        var broken: [String] = []
        func bad(_ rule: String, _ path: String, _ message: String) {
            findings.append(.error(rule, relative(path), message))
            broken.append(path)
        }
        scan.walk { entry in
            if let problem = entries.problem(of: entry) {
                bad("cache-corrupt-entry", entry.path, problem)
            } else if entry.isFromFuture(at: now) {
                bad(
                    "cache-future-entry", entry.path,
                    "resolved \(Int(-entry.age(at: now)))s in the future, beyond the \(Int(CachedFlow.clockSkew))s clock skew allowed: its writer's clock was wrong; it is served as stale, never fresh"
                )
            }
        }
        // Each alias by its key alone (`FlowEntries.target`), not a set of every live key.
        for alias in scan.aliases {
            if let target = entries.target(of: alias), entries.problem(of: target) == nil,
                !target.isFromFuture(at: now)
            {
                continue
            }
            bad("cache-dangling-alias", alias.path, "points at an entry that is missing, corrupt or from the future")
        }
        // An empty key directory (a write that failed on a full disk, or a writer killed before its
        // entry got its name) is harmless, like a url file without its image: `prune` removes it.
        for font in scan.fonts {
            let name = PathName.lastComponent(of: font.path)
            let expected = String(name.prefix(while: { $0 != "." }))
            guard let data = FileManager.default.contents(atPath: font.path), Digest.sha256Hex(data) == expected else {
                bad("cache-font-hash", font.path, "content does not match the SHA-256 in its name")
                continue
            }
        }
        let urlDirs = Set(scan.imageURLFiles.map { PathName.parent(of: $0.path) })
        for image in scan.images where !urlDirs.contains(PathName.parent(of: image.path)) {
            bad("cache-image-url", image.path, "image without its url file")
        }
        let imageDirs = Set(scan.images.map { PathName.parent(of: $0.path) })
        for urlFile in scan.imageURLFiles {
            let dir = PathName.parent(of: urlFile.path)
            // A url file whose image is not (yet) written is what a writer killed between
            // the two leaves: harmless, and `prune` removes it.
            if !imageDirs.contains(dir) { continue }
            let url = FileManager.default.contents(atPath: urlFile.path).map { String(decoding: $0, as: UTF8.self) }
            if url.map({ Self.urlHash($0) }) != PathName.lastComponent(of: dir) {
                bad("cache-image-url", urlFile.path, "url file does not hash to its directory name")
            }
        }
        for temp in scan.temporaries where !Self.writerAlive(temp.path) {
            bad("cache-temp-debris", temp.path, "temporary file of a writer that is gone")
        }
        for file in scan.foreign { bad("cache-foreign-file", file.path, "not part of the cache layout") }
        // Format 2: segments with a torn or corrupt record (a writer killed mid-append, a disk's
        // error) or a damaged index, and flows whose bytes do not match their name.
        for (path, problem, torn) in scan.logProblems {
            if torn {
                // What a writer killed mid-append leaves, as a dead writer's temporary file is:
                // readers stop before it; --repair and any prune drop it.
                bad("cache-temp-debris", path, "\(problem): a writer was killed while appending")
            } else {
                bad("cache-corrupt-segment", path, problem)
            }
        }
        // A sealed segment's facts (what `info` counts from) that do not hold; --repair removes them, and
        // `info` reads that segment's records instead until a compaction writes new ones. Not of a segment
        // found damaged above: that finding says it, and its repair (a compaction) replaces both.
        let factsBytes = WholeFileBuffer()
        let damaged = Set(scan.logProblems.map { ExactName($0.path) })
        for file in scan.segments where file.path.endsWithBytes(LogSegment.suffix + SegmentFacts.suffix) {
            let segment = String(decoding: file.path.utf8.dropLast(SegmentFacts.suffix.utf8.count), as: UTF8.self)
            if damaged.contains(ExactName(segment)) { continue }
            if let problem = SegmentFacts.problem(ofSegment: segment, reading: factsBytes) {
                bad("cache-corrupt-segment", file.path, problem)
            }
        }
        for object in scan.objects {
            let name = PathName.lastComponent(of: object.path)
            if log.readObject(name) == nil {
                bad("cache-corrupt-entry", object.path, "flow bytes do not match the SHA-256 in their name")
            }
        }
        return (findings, broken, entries)
    }

    /// Whether the writer of a named temporary (`.tmp-<pid>-<start>-…`,
    /// `AtomicFile.openUnnamed`) may still be writing it: it holds the
    /// file's `flock` while it writes, which a writer on any node, in any
    /// pid namespace, holds until it exits; or, where locks do nothing, a
    /// process of that pid started at that time runs on this machine. A file
    /// already gone is not debris. An older name (`.tmp-<pid>-…`) is checked
    /// by its pid alone, as is the marker's (`.fpcache.json.tmp-<pid>-…`).
    static func writerAlive(_ path: String) -> Bool {
        let name = PathName.lastComponent(of: path)
        let fields =
            name.hasPrefix(markerTemporaryPrefix)
            ? name.dropFirst(markerTemporaryPrefix.count).split(separator: "-")
            : name.dropFirst(AtomicFile.tempPrefix.count).split(separator: "-")
        guard let first = fields.first, let pid = Int32(first) else { return false }
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 { return errno == ENOENT || errno == EACCES }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK { return true }
        let started = fields.count >= 3 ? UInt64(fields[1]) : nil
        return Platform.processRunning(pid, startedAt: started)
    }

    func relative(_ path: String) -> String {
        let prefix = root.utf8.count + 1
        return path.startsWithBytes(root + "/") ? String(decoding: path.utf8.dropFirst(prefix), as: UTF8.self) : path
    }

    // MARK: Clear

    public enum ClearScope: String, Sendable, CaseIterable {
        /// `clearCache()`: flows (and their aliases), fonts, icons.
        case flows
        /// `clearImageCache()`: images, icons.
        case images
        case all
    }

    /// Empties the scope's directories; the marker stays. Counts only the files
    /// really removed, and names those that could not be (with the reason).
    public func clear(_ scope: ClearScope) throws -> ClearResult {
        try withLock(exclusive: true) {
            let dirs: [String] =
                switch scope {
                case .flows: [flowsDir, aliasesDir, log.logDir, log.objectsDir, fontsDir, iconsDir]
                case .images: [imagesDir, iconsDir]
                case .all: [flowsDir, aliasesDir, log.logDir, log.objectsDir, fontsDir, iconsDir, imagesDir]
                }
            var result = ClearResult()
            for dir in dirs { Self.empty(dir, into: &result, relativeTo: root) }
            if scope != .flows { imageTotal.withLock { $0.total = nil } }
            return result
        }
    }

    /// Unlinks every file under `dir`, then the directories left empty, `dir` too.
    private static func empty(_ dir: String, into result: inout ClearResult, relativeTo root: String) {
        guard let walker = FileManager.default.enumerator(atPath: dir) else { return }
        var directories: [String] = []
        while let relative = walker.nextObject() as? String {
            let path = "\(dir)/\(relative)"
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR {
                directories.append(path)
            } else if unlink(path) == 0 {
                result.files += 1
                result.bytes += Int64(info.st_size)
            } else if errno != ENOENT {
                let shown = path.hasPrefix(root + "/") ? String(path.dropFirst(root.count + 1)) : path
                result.failed.append((shown, Errno.describe(errno)))
            }
        }
        for directory in directories.reversed() + [dir] { rmdir(directory) }
    }
}

/// What `clear` removed, and what it could not.
public struct ClearResult: Sendable {
    public var files = 0
    public var bytes: Int64 = 0
    /// Paths relative to the cache root, with the reason.
    public var failed: [(path: String, reason: String)] = []
}
