import Crypto
import Foundation

/// What reading a bundle found: its digest and manifest when readable, every
/// finding, and one row per entry for `inspect`.
public struct BundleReport: Sendable {
    public struct Entry: Sendable {
        public let path: String
        public let size: Int64
        public let compressedSize: Int64
        public let sha256: String?
    }

    public let file: String
    public var digest: String?
    public var manifest: BundleManifest?
    public var findings: [Finding]
    public var entries: [Entry]

    public var isValid: Bool { !findings.hasErrors }
}

/// Validates a `.fpbundle` in one streaming pass: the structure
/// first (ZipDirectory), then every entry decompressed block by block through
/// libarchive, hashed, counted and stopped as soon as it breaks a limit. Nothing
/// is extracted; only the manifest and one flow at a time are held in memory.
public enum BundleReader {
    public struct Options: Sendable {
        /// Turn warnings (unknown component types, unreferenced assets, age) into errors.
        public var strict = false
        /// Warn (fail under `strict`) when `created_at` is older than this many seconds.
        public var maxAge: TimeInterval?
        /// When set (raw Ed25519 public key bytes), `manifest.sig` must be a valid signature by this key.
        public var publicKey: Data?
        public var now = Date()
        public init(strict: Bool = false, maxAge: TimeInterval? = nil) {
            self.strict = strict
            self.maxAge = maxAge
        }
    }

    /// Throws `FPError.inputMissing` when the file does not exist; every other
    /// problem is a finding in the report.
    public static func validate(_ path: String, options: Options = .init()) throws -> BundleReport {
        // A key that does not parse must not quietly turn the signature check off.
        if let raw = options.publicKey, (try? Curve25519.Signing.PublicKey(rawRepresentation: raw)) == nil {
            throw FPError.usage("the public key is not an Ed25519 public key (32 raw bytes, got \(raw.count))")
        }
        let file = try RandomAccessFile(path: path)
        var report = BundleReport(file: path, digest: nil, manifest: nil, findings: [], entries: [])
        let (directory, structural) = ZipDirectory.read(file)
        report.findings = structural
        guard let directory, !structural.hasErrors else { return report }
        var pass = ContentPass(directory: directory, options: options)
        pass.run(path: path)
        report.findings += pass.findings
        report.digest = pass.digest
        report.manifest = pass.manifest
        report.entries = pass.rows
        if options.strict {
            report.findings = report.findings.map { f in
                var f = f
                f.severity = .error
                return f
            }
        }
        return report
    }
}

/// The decompressing half of validation, entry by entry in archive order.
private struct ContentPass {
    let directory: ZipDirectory
    let options: BundleReader.Options
    var findings: [Finding] = []
    var manifest: BundleManifest?
    var digest: String?
    var rows: [BundleReport.Entry] = []
    var hashes: [String: String] = [:]
    var referencedAssets = Set<String>()
    /// (font file, sha256 the flow declares, where) checked once all entries are hashed.
    var fontChecks: [(path: String, sha256: String, at: String)] = []
    var flowsSeen = Set<String>()
    /// Entries hashed on the second core, checked against the manifest in finish().
    let pipeline = HashPipeline()
    var pending: [(index: Int, path: String, size: Int64)] = []
    var manifestBytes: Data?
    var signatureBytes: Data?

    init(directory: ZipDirectory, options: BundleReader.Options) {
        self.directory = directory
        self.options = options
    }

    mutating func run(path: String) {
        let reader: ZipReader
        do { reader = try ZipReader(path: path) } catch {
            findings.append(.error("zip-corrupt", "-", "\(error)"))
            return
        }
        let names = Set(directory.entries.map(\.name))
        for entry in directory.entries {
            let header: ZipReader.Entry?
            do { header = try reader.next() } catch {
                findings.append(.error("zip-corrupt", entry.name, "\(error)"))
                return
            }
            guard let header, header.path == entry.name else {
                findings.append(
                    .error(
                        "zip-structure", entry.name,
                        "libarchive does not see this entry where the central directory puts it"))
                return
            }
            if header.isEncrypted {
                findings.append(.error("zip-encrypted", entry.name, "entry is encrypted"))
                return
            }
            let keep = entry.index == 0 || entry.name == BundleManifest.signaturePath || isFlowPath(entry.name)
            guard let (size, body) = readEntry(reader, entry, keepBytes: keep) else {
                _ = pipeline.drain()
                return
            }
            if let body {
                let sha = Digest.sha256Hex(body)
                record(entry, size: size, sha256: sha)
                if entry.index == 0 {
                    manifestBytes = body
                    readManifest(body, names: names)
                    if manifest == nil { return }
                } else if entry.name == BundleManifest.signaturePath {
                    signatureBytes = body
                } else {
                    checkFlow(entry.name, body, names: names)
                }
            } else {
                pending.append((entry.index, entry.name, size))
            }
        }
        let digests = pipeline.drain()
        for p in pending {
            record(directory.entries[p.index], size: p.size, sha256: digests[p.index] ?? "")
        }
        let position = order
        rows.sort { a, b in position[a.path, default: .max] < position[b.path, default: .max] }
        finish(names: names)
    }

    /// Archive position of each path, so rows list entries in archive order.
    var order: [String: Int] { Dictionary(directory.entries.map { ($0.name, $0.index) }, uniquingKeysWith: min) }

    mutating func record(_ entry: ZipDirectory.Entry, size: Int64, sha256: String) {
        hashes[entry.name] = sha256
        rows.append(.init(path: entry.name, size: size, compressedSize: entry.compressedSize, sha256: sha256))
        if entry.index != 0 { checkListed(entry.name, size: size, sha256: sha256) }
    }

    func isFlowPath(_ path: String) -> Bool {
        manifest?.placements.values.contains { $0.path == path } ?? false
    }

    /// Streams one entry, never trusting its declared size: stops at the first
    /// byte past what it declared, past the entry limit, or past the ratio limit.
    /// Kept entries come back whole (the caller hashes them); the others are hashed
    /// on the pipeline under the entry's index.
    mutating func readEntry(_ reader: ZipReader, _ entry: ZipDirectory.Entry, keepBytes: Bool) -> (Int64, Data?)? {
        let pipeline = self.pipeline
        var count: Int64 = 0
        var body: Data? = keepBytes ? Data() : nil
        var head: [UInt8] = []
        var problem: Finding?
        let ratioCap = BundleLimits.maxCompressionRatio * max(entry.compressedSize, 1)
        do {
            try reader.readData { chunk in
                count += Int64(chunk.count)
                if count > entry.uncompressedSize {
                    problem = .error(
                        "zip-size-mismatch", entry.name,
                        "more data than the \(entry.uncompressedSize) bytes its headers declare")
                } else if count > BundleLimits.maxEntryBytes {
                    problem = .error("limit-entry-size", entry.name, "over \(BundleLimits.maxEntryBytes) bytes")
                } else if entry.method == 8, count > ratioCap {
                    problem = .error(
                        "limit-compression-ratio", entry.name,
                        "expands more than \(BundleLimits.maxCompressionRatio) times")
                } else if keepBytes, count > BundleLimits.maxJSONBytes {
                    problem = .error(
                        "limit-json-size", entry.name, "JSON documents hold at most \(BundleLimits.maxJSONBytes) bytes")
                }
                if problem != nil { return false }
                if keepBytes { body?.append(contentsOf: chunk) } else { pipeline.update(entry.index, chunk) }
                if head.count < MediaType.headSize { head += chunk.prefix(MediaType.headSize - head.count) }
                return true
            }
        } catch {
            findings.append(.error("zip-corrupt", entry.name, "\(error)"))
            return nil
        }
        if let problem {
            findings.append(problem)
            return nil
        }
        if count != entry.uncompressedSize {
            findings.append(
                .error("zip-size-mismatch", entry.name, "\(count) bytes, the headers declare \(entry.uncompressedSize)")
            )
            return nil
        }
        if !keepBytes { pipeline.finish(entry.index) }
        if entry.name.hasPrefix("media/") || entry.name.hasPrefix("fonts/"),
            let mismatch = MediaType.mismatch(path: entry.name, head: head)
        {
            findings.append(mismatch)
        }
        return (count, body)
    }

    mutating func readManifest(_ data: Data, names: Set<String>) {
        digest = Digest.sha256Hex(data)
        let (parsed, manifestFindings) = BundleManifest.parse(data)
        findings += manifestFindings
        guard let parsed else { return }
        manifest = parsed
        findings += directory.canonicalHeaderProblems(createdAt: parsed.createdAt)
        for (key, placement) in parsed.placements {
            let at = "\(BundleManifest.path)#/placements/\(key)"
            if placement.path != "flows/\(key).json" {
                findings.append(.error("manifest-placement", at, "path \(placement.path) should be flows/\(key).json"))
            }
            if !names.contains(placement.path) {
                findings.append(
                    .error("manifest-missing-file", placement.path, "placement \(key)'s flow is not in the archive"))
            }
        }
        for path in CanonicalJSON.sortedKeys(parsed.files.keys) where !names.contains(path) {
            findings.append(.error("manifest-missing-file", path, "listed in manifest.json but not in the archive"))
        }
        if let maxAge = options.maxAge, options.now.timeIntervalSince(parsed.createdAt) > maxAge {
            findings.append(
                .warning(
                    "bundle-age", "\(BundleManifest.path)#/created_at",
                    "created \(RFC3339.string(parsed.createdAt)), older than the allowed \(Int(maxAge))s"))
        }
    }

    mutating func checkListed(_ path: String, size: Int64, sha256: String) {
        if path == BundleManifest.signaturePath { return }
        guard let listed = manifest?.files[path] else {
            findings.append(
                .error("manifest-unlisted-file", path, "in the archive but not listed in manifest.json files"))
            return
        }
        if listed.size != size {
            findings.append(.error("manifest-size-mismatch", path, "\(size) bytes, manifest.json says \(listed.size)"))
        }
        if listed.sha256 != sha256 {
            findings.append(
                .error("manifest-hash-mismatch", path, "sha256 \(sha256), manifest.json says \(listed.sha256)"))
        }
        if path.hasPrefix("media/") || path.hasPrefix("fonts/") {
            let stem =
                path.split(separator: "/").last.map {
                    $0.split(separator: ".", maxSplits: 1).first.map(String.init) ?? ""
                } ?? ""
            if stem != sha256 {
                findings.append(.error("bundle-asset-name", path, "asset files are named by their sha256 (\(sha256))"))
            }
        }
    }

    mutating func checkFlow(_ path: String, _ data: Data, names: Set<String>) {
        guard let manifest else { return }
        flowsSeen.insert(path)
        let (doc, flowFindings) = FlowDocument.validate(data: data, location: path)
        findings += flowFindings
        guard let doc else { return }
        for (key, placement) in manifest.placements where placement.path == path {
            if placement.flowID != doc.id || placement.version != doc.version {
                findings.append(
                    .error(
                        "manifest-placement", "\(BundleManifest.path)#/placements/\(key)",
                        "says \(placement.flowID)/\(placement.version), the flow is \(doc.id)/\(doc.version)"))
            }
        }
        for url in doc.allImages {
            guard let media = manifest.media[url], names.contains(media) else {
                findings.append(.error("bundle-missing-media", path, "image \(url) is not carried by the bundle"))
                continue
            }
            referencedAssets.insert(media)
        }
        for font in doc.fonts {
            guard let file = manifest.fonts[font.name], names.contains(file) else {
                findings.append(.error("bundle-missing-font", path, "font '\(font.name)' is not carried by the bundle"))
                continue
            }
            referencedAssets.insert(file)
            if let sha = font.sha256 { fontChecks.append((file, sha, path)) }
        }
    }

    mutating func finish(names: Set<String>) {
        if let raw = options.publicKey, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw),
            let manifestBytes,
            let problem = BundleSigning.verify(signature: signatureBytes, manifest: manifestBytes, publicKey: key)
        {
            findings.append(problem)
        }
        for check in fontChecks where hashes[check.path] != nil && hashes[check.path] != check.sha256 {
            findings.append(.error("bundle-font-hash", check.path, "sha256 differs from the one \(check.at) declares"))
        }
        for name in names.sorted()
        where (name.hasPrefix("media/") || name.hasPrefix("fonts/")) && !referencedAssets.contains(name) {
            findings.append(.warning("bundle-unreferenced-asset", name, "no flow references this asset"))
        }
        for name in names.sorted() where name.hasPrefix("flows/") && !flowsSeen.contains(name) {
            findings.append(.warning("bundle-unreferenced-flow", name, "no placement uses this flow"))
        }
    }
}
