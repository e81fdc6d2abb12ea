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
    }

    public let kind: Kind
    public let path: String
    public let bytes: Int64
    public let reason: String
}

extension CacheStore {
    // MARK: Verify

    /// Reads every entry and checks it; one finding per problem (rule ids
    /// `cache-corrupt-entry`, `cache-dangling-alias`, `cache-font-hash`,
    /// `cache-image-url`, `cache-temp-debris`, `cache-foreign-file`). With
    /// `repair`, removes exactly the files the findings name, nothing else.
    public func verify(repair: Bool) throws -> [Finding] {
        let scan = scan()
        var findings: [Finding] = []
        var broken: [String] = []
        func bad(_ rule: String, _ path: String, _ message: String) {
            findings.append(.error(rule, relative(path), message))
            broken.append(path)
        }
        var liveKeys = Set<String>()
        for entry in scan.flows {
            if let (_, _, problem) = Self.inspectEntry(entry), let problem {
                bad("cache-corrupt-entry", entry.path, problem)
            } else {
                liveKeys.insert("\(CacheNames.encode(entry.placement))/\(entry.keyName)")
            }
        }
        for alias in scan.aliases where !liveKeys.contains("\(CacheNames.encode(alias.placement))/\(alias.target)") {
            bad("cache-dangling-alias", alias.path, "points at an entry that is missing or corrupt")
        }
        for font in scan.fonts {
            let name = (font.path as NSString).lastPathComponent
            let expected = String(name.prefix(while: { $0 != "." }))
            guard let data = FileManager.default.contents(atPath: font.path), Digest.sha256Hex(data) == expected else {
                bad("cache-font-hash", font.path, "content does not match the SHA-256 in its name")
                continue
            }
        }
        let urlDirs = Set(scan.imageURLFiles.map { ($0.path as NSString).deletingLastPathComponent })
        for image in scan.images where !urlDirs.contains((image.path as NSString).deletingLastPathComponent) {
            bad("cache-image-url", image.path, "image without its url file")
        }
        let imageDirs = Set(scan.images.map { ($0.path as NSString).deletingLastPathComponent })
        for urlFile in scan.imageURLFiles {
            let dir = (urlFile.path as NSString).deletingLastPathComponent
            // A url file whose image is not (yet) written is what a writer killed between
            // the two leaves: harmless, and `prune` removes it.
            if !imageDirs.contains(dir) { continue }
            let url = FileManager.default.contents(atPath: urlFile.path).map { String(decoding: $0, as: UTF8.self) }
            if url.map({ Self.urlHash($0) }) != (dir as NSString).lastPathComponent {
                bad("cache-image-url", urlFile.path, "url file does not hash to its directory name")
            }
        }
        for temp in scan.temporaries where !Self.writerAlive(temp.path) {
            bad("cache-temp-debris", temp.path, "temporary file of a writer that is gone")
        }
        for file in scan.foreign { bad("cache-foreign-file", file.path, "not part of the cache layout") }
        if repair && !broken.isEmpty {
            try withLock(exclusive: true) {
                for path in broken { try? FileManager.default.removeItem(atPath: path) }
            }
        }
        return findings
    }

    /// `.tmp-<pid>-…`: is that process still running?
    static func writerAlive(_ path: String) -> Bool {
        let name = (path as NSString).lastPathComponent.dropFirst(AtomicFile.tempPrefix.count)
        guard let pid = Int32(name.prefix(while: { $0.isNumber })) else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    func relative(_ path: String) -> String {
        path.hasPrefix(root + "/") ? String(path.dropFirst(root.count + 1)) : path
    }

    // MARK: Prune

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
        public var now = Date()
        public init() {}
    }

    /// Removes what the options select, plus superseded files (older copies of a
    /// key that readers already ignore). A stale flow goes only when asked for.
    public func prune(_ o: PruneOptions) throws -> [Removal] {
        let work = { () -> [Removal] in
            let scan = self.scan()
            var out: [Removal] = []
            var gone = Set<String>()
            func remove(_ kind: Removal.Kind, _ path: String, _ bytes: Int64, _ reason: String) {
                guard gone.insert(path).inserted else { return }
                out.append(Removal(kind: kind, path: self.relative(path), bytes: bytes, reason: reason))
            }
            for file in scan.superseded { remove(.superseded, file.path, file.size, "older copy of a key") }
            let imageDirs = Set(scan.images.map { ($0.path as NSString).deletingLastPathComponent })
            for urlFile in scan.imageURLFiles
            where !imageDirs.contains((urlFile.path as NSString).deletingLastPathComponent) {
                remove(.orphan, urlFile.path, urlFile.size, "url file without an image")
            }
            if o.flows {
                var removedKeys = Set<String>()
                let userSuffix = o.userID.map { "~" + CacheNames.bounded($0, max: Self.maxNameField) + "/" }
                for entry in scan.flows {
                    if let user = o.userID, let userSuffix, entry.path.contains(userSuffix) {
                        remove(.flow, entry.path, entry.size, "identity \(user)")
                    } else if let age = o.olderThan, entry.age(at: o.now) > age {
                        remove(.flow, entry.path, entry.size, "resolved \(Int(entry.age(at: o.now)))s ago")
                    } else {
                        continue
                    }
                    removedKeys.insert("\(CacheNames.encode(entry.placement))/\(entry.keyName)")
                }
                for alias in scan.aliases
                where removedKeys.contains("\(CacheNames.encode(alias.placement))/\(alias.target)") {
                    remove(.alias, alias.path, alias.size, "points at a removed entry")
                }
            }
            if o.images {
                var kept: [CachedImage] = []
                for image in scan.images {
                    if o.expired, image.isExpired(at: o.now, ttl: self.budgets.imageTTL) {
                        remove(.image, image.path, image.size, "expired")
                    } else if let age = o.olderThan, o.now.timeIntervalSince(image.lastAccess) > age {
                        remove(
                            .image, image.path, image.size,
                            "last used \(Int(o.now.timeIntervalSince(image.lastAccess)))s ago")
                    } else {
                        kept.append(image)
                    }
                }
                if let budget = o.maxImageBytes {
                    var total = kept.reduce(0) { $0 + $1.size }
                    for image in kept.sorted(by: { $0.lastAccess < $1.lastAccess }) where total > budget {
                        remove(.image, image.path, image.size, "least recently used over \(budget) bytes")
                        total -= image.size
                    }
                }
            }
            if o.unreferenced {
                var images = Set<String>()
                var fonts = Set<String>()
                for entry in scan.flows where !gone.contains(entry.path) {
                    guard let (doc, _) = Self.readEntry(entry) else { continue }
                    images.formUnion(doc.allImages.map(Self.urlHash))
                    fonts.formUnion(doc.fonts.compactMap(\.sha256))
                }
                if o.images {
                    for image in scan.images where !images.contains(image.urlHash) {
                        remove(.image, image.path, image.size, "no cached flow refers to it")
                    }
                }
                for font in scan.fonts
                where !fonts.contains(String((font.path as NSString).lastPathComponent.prefix(64))) {
                    remove(.font, font.path, font.size, "no cached flow refers to it")
                }
            }
            if !o.dryRun {
                for r in out {
                    let path = "\(self.root)/\(r.path)"
                    unlink(path)
                    let dir = (path as NSString).deletingLastPathComponent
                    if r.kind == .image { Self.removeImageDirIfEmpty(path) } else if dir != self.fontsDir { rmdir(dir) }
                }
            }
            return out
        }
        return o.dryRun ? work() : try withLock(exclusive: true, work)
    }

    // MARK: Clear

    public enum ClearScope: String, Sendable, CaseIterable {
        /// `clearCache()`: flows (and their aliases), fonts, icons.
        case flows
        /// `clearImageCache()`: images, icons.
        case images
        case all
    }

    /// Empties the scope's directories; the marker stays. Returns files and bytes removed.
    public func clear(_ scope: ClearScope) throws -> (files: Int, bytes: Int64) {
        try withLock(exclusive: true) {
            let dirs: [String] =
                switch scope {
                case .flows: [flowsDir, aliasesDir, fontsDir, iconsDir]
                case .images: [imagesDir, iconsDir]
                case .all: [flowsDir, aliasesDir, fontsDir, iconsDir, imagesDir]
                }
            var files = 0
            var bytes: Int64 = 0
            for dir in dirs {
                if let e = FileManager.default.enumerator(atPath: dir) {
                    while let p = e.nextObject() as? String {
                        if let attrs = e.fileAttributes, attrs[.type] as? FileAttributeType == .typeRegular {
                            files += 1
                            bytes += (attrs[.size] as? Int64) ?? 0
                        }
                        _ = p
                    }
                }
                try? FileManager.default.removeItem(atPath: dir)
            }
            if scope != .flows { imageTotal.withLock { $0 = 0 } }
            return (files, bytes)
        }
    }
}
