import Crypto
import Foundation
import Synchronization

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
    /// What `manifest.sig` is and which key made it: checked with
    /// `Options.trust` or `publicKey` when given, else only read.
    public var signature: SignatureBlock.Summary?

    public var isValid: Bool { !findings.hasErrors }
}

/// Validates a `.fpbundle` in one streaming pass: the structure
/// first (ZipDirectory), then every entry decompressed block by block through
/// libarchive, hashed, counted and stopped as soon as it breaks a limit. Nothing
/// is extracted; only the manifest and one flow at a time are held in memory.
extension BundleReport {
    /// Files and bytes of one kind of entry.
    public struct KindTotal: Sendable, Equatable, Encodable {
        public var files = 0
        public var bytes: Int64 = 0
        public var compressedBytes: Int64 = 0
    }

    /// `manifest` for manifest.json and manifest.sig, else the entry's top
    /// folder: `flows`, `media`, `fonts`.
    public static func kind(of path: String) -> String {
        if path == BundleManifest.path || path == BundleManifest.signaturePath { return "manifest" }
        return String(path.split(separator: "/").first ?? "other")
    }

    /// The entries' files and bytes, by kind.
    public var kinds: [String: KindTotal] {
        var kinds: [String: KindTotal] = [:]
        for e in entries {
            kinds[Self.kind(of: e.path), default: KindTotal()].files += 1
            kinds[Self.kind(of: e.path), default: KindTotal()].bytes += e.size
            kinds[Self.kind(of: e.path), default: KindTotal()].compressedBytes += e.compressedSize
        }
        return kinds
    }
}

public enum BundleValidator {
    public struct Options: Sendable {
        /// Turn warnings (unknown component types, unreferenced assets, age) into errors.
        public var strict = false
        /// Warn (fail under `strict`) when `created_at` is older than this many seconds.
        public var maxAge: TimeInterval?
        /// When set (raw Ed25519 public key bytes), `manifest.sig` must be a valid signature by this key.
        public var publicKey: Data?
        /// When set, `manifest.sig` must be in the trust-root form and trusted
        /// from this policy's root (`SignatureBlock.verify`).
        public var trust: SignatureBlock.Policy?
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
        let (directory, structural) = ZipDirectory.read(file, policy: BundleLimits.zipPolicy)
        report.findings = structural
        guard let directory, !structural.hasErrors else {
            // Entries found by a broken directory could be anything: none is read.
            report.findings.append(
                .warning(
                    "rule-not-run", "-",
                    "no entry was read (manifest, flows, media, fonts, signature): the zip structure is broken; "
                        + "build the bundle again"))
            return report
        }
        var pass = ContentPass(directory: directory, options: options)
        pass.run(path: path)
        report.findings += pass.findings
        report.digest = pass.digest
        report.manifest = pass.manifest
        report.entries = pass.rows
        report.signature = pass.signature
        if options.strict { report.findings = report.findings.strict }
        return report
    }
}

/// The decompressing half of validation. The manifest first, on the calling
/// thread; then the other entries on every core: each worker opens the archive
/// with a libarchive reader of its own, walks every header in archive order and
/// decompresses, CRC-checks, hashes (and, for flows, validates) the entries it
/// was given, skipping the rest. Results are taken in archive order, up to the
/// first entry that could not be read, so the report is the one a single pass
/// would give.
private struct ContentPass {
    let directory: ZipDirectory
    let options: BundleValidator.Options
    var findings: [Finding] = []
    var manifest: BundleManifest?
    var digest: String?
    var rows: [BundleReport.Entry] = []
    var hashes: [String: String] = [:]
    var referencedAssets = Set<String>()
    /// (font file, sha256 the flow declares, where) checked once all entries are hashed.
    var fontChecks: [(path: String, sha256: String, at: String)] = []
    var flowsSeen = Set<String>()
    var manifestBytes: Data?
    var signatureBytes: Data?
    var signature: SignatureBlock.Summary?
    /// Where the canonical-header findings belong in `findings`, once the manifest parsed.
    var canonicalFindingsAt: Int?

    init(directory: ZipDirectory, options: BundleValidator.Options) {
        self.directory = directory
        self.options = options
    }

    /// What a worker found for one entry.
    struct EntryResult: Sendable {
        var findings: [Finding] = []
        /// nil when the entry could not be read whole: the pass stops there.
        var read: (size: Int64, sha256: String)?
        /// manifest.sig's bytes.
        var signature: Data?
        /// For a flow: the assets it references and its fonts' declared hashes.
        var assets: [String] = []
        var fontChecks: [(path: String, sha256: String)] = []
        var isFlow = false
    }

    mutating func run(path: String) {
        let names = Set(directory.entries.map(\.name))
        guard let first = directory.entries.first else { return }
        // The manifest decides what the other entries are.
        let reader: ZipReader
        do { reader = try ZipReader(path: path, checksCRC: false) } catch {
            findings.append(.error("zip-corrupt", "-", "\(error)"))
            return
        }
        var manifestResult = EntryResult()
        guard Self.header(reader, first, into: &manifestResult),
            let (size, body) = Self.readEntry(reader, first, keepBytes: true, into: &manifestResult), let body
        else {
            findings += manifestResult.findings
            return
        }
        findings += manifestResult.findings
        record(first, size: size, sha256: Digest.sha256Hex(body))
        manifestBytes = body
        readManifest(body, names: names)
        guard let manifest else {
            findings.append(
                .warning(
                    "rule-not-run", "\(BundleManifest.path)",
                    "the flows, media and fonts were not checked: manifest.json, which says what they are, "
                        + "could not be read; build the bundle again"))
            return
        }

        let rest = Array(directory.entries.dropFirst())
        let groups = Self.balanced(rest, ways: min(2, max(1, ProcessInfo.processInfo.activeProcessorCount)))
        let context = WorkerContext(path: path, entries: directory.entries, manifest: manifest, names: names)
        let results = Mutex<[Int: EntryResult]>([:])
        let canonical = Mutex<[Finding]>([])
        let directory = self.directory
        // One more job than readers: the header bytes against their canonical form.
        DispatchQueue.concurrentPerform(iterations: groups.count + 1) { g in
            guard g < groups.count else {
                let problems = directory.canonicalHeaderProblems(createdAt: manifest.createdAt)
                canonical.withLock { $0 = problems }
                return
            }
            let found = context.work(on: groups[g])
            results.withLock { $0.merge(found) { a, _ in a } }
        }
        if let at = canonicalFindingsAt { findings.insert(contentsOf: canonical.withLock { $0 }, at: at) }
        let byIndex = results.withLock { $0 }
        for entry in rest {
            guard let result = byIndex[entry.index] else { return }  // a worker stopped before it
            findings += result.findings
            guard let (size, sha256) = result.read else { return }
            record(entry, size: size, sha256: sha256)
            if let signature = result.signature { signatureBytes = signature }
            if result.isFlow { flowsSeen.insert(entry.name) }
            referencedAssets.formUnion(result.assets)
            fontChecks += result.fontChecks.map { ($0.path, $0.sha256, entry.name) }
        }
        finish(names: names)
    }

    /// Entries split into `ways` groups of about equal work: a JSON byte (parsed
    /// and validated) costs about 20 hashed bytes, and any entry a header's worth.
    static func balanced(_ entries: [ZipDirectory.Entry], ways: Int) -> [Set<Int>] {
        func cost(_ entry: ZipDirectory.Entry) -> Int64 {
            entry.uncompressedSize * (entry.name.hasSuffix(".json") ? 20 : 1) + 4096
        }
        var groups = [Set<Int>](repeating: [], count: ways)
        var load = [Int64](repeating: 0, count: ways)
        for entry in entries.sorted(by: { cost($0) > cost($1) }) {
            let lightest = load.indices.min { load[$0] < load[$1] } ?? 0
            groups[lightest].insert(entry.index)
            load[lightest] += cost(entry)
        }
        return groups
    }

    /// One worker's share: everything it needs, all of it Sendable.
    struct WorkerContext: Sendable {
        let path: String
        let entries: [ZipDirectory.Entry]
        let manifest: BundleManifest
        let names: Set<String>
        /// Flow path -> the placements that name it, by key: built once, not per flow.
        let placementsByPath: [String: [(key: String, placement: BundleManifest.Placement)]]

        init(path: String, entries: [ZipDirectory.Entry], manifest: BundleManifest, names: Set<String>) {
            self.path = path
            self.entries = entries
            self.manifest = manifest
            self.names = names
            var byPath: [String: [(key: String, placement: BundleManifest.Placement)]] = [:]
            for (key, placement) in manifest.placements.sorted(by: { $0.key < $1.key }) {
                byPath[placement.path, default: []].append((key, placement))
            }
            placementsByPath = byPath
        }

        func work(on mine: Set<Int>) -> [Int: EntryResult] {
            var out: [Int: EntryResult] = [:]
            let reader: ZipReader
            do { reader = try ZipReader(path: path, checksCRC: false) } catch {
                if let index = mine.min() {
                    out[index] = EntryResult(findings: [.error("zip-corrupt", "-", "\(error)")])
                }
                return out
            }
            for entry in entries {
                var result = EntryResult()
                let ok = ContentPass.header(reader, entry, into: &result)
                guard mine.contains(entry.index) else {
                    if ok { continue } else { return out }  // the owner reports it
                }
                guard ok else {
                    out[entry.index] = result
                    return out
                }
                let isFlow = placementsByPath[entry.name] != nil
                let keep = isFlow || entry.name == BundleManifest.signaturePath
                guard let (size, body) = ContentPass.readEntry(reader, entry, keepBytes: keep, into: &result) else {
                    out[entry.index] = result
                    return out
                }
                if let body {
                    result.read = (size, Digest.sha256Hex(body))
                    if isFlow { check(flow: entry.name, body, into: &result) } else { result.signature = body }
                }
                if let (size, sha256) = result.read {
                    result.findings += ContentPass.listingProblems(
                        entry.name, size: size, sha256: sha256, manifest: manifest)
                }
                out[entry.index] = result
            }
            return out
        }

        /// A flow's own findings, what it references, and its manifest placement.
        func check(flow path: String, _ data: Data, into result: inout EntryResult) {
            result.isFlow = true
            let (doc, flowFindings) = FlowDocument.validate(data: data, location: path)
            result.findings += flowFindings
            guard let doc else { return }
            for (key, placement) in placementsByPath[path] ?? [] {
                if !placement.flowID.sameBytes(as: doc.id) || !placement.version.sameBytes(as: doc.version) {
                    result.findings.append(
                        .error(
                            "manifest-placement", "\(BundleManifest.path)#/placements/\(key)",
                            "says \(placement.flowID)/\(placement.version), the flow is \(doc.id)/\(doc.version)"))
                }
            }
            for url in doc.allImages {
                guard let media = manifest.media[ExactName(url)], names.contains(media) else {
                    result.findings.append(
                        .error("bundle-missing-media", path, "image \(url) is not carried by the bundle"))
                    continue
                }
                result.assets.append(media)
            }
            for font in doc.fonts {
                guard let file = manifest.fonts[ExactName(font.name)], names.contains(file) else {
                    result.findings.append(
                        .error("bundle-missing-font", path, "font '\(font.name)' is not carried by the bundle"))
                    continue
                }
                result.assets.append(file)
                if let sha = font.sha256 { result.fontChecks.append((file, sha)) }
            }
        }
    }

    /// The next header must be `entry` (as the central directory says) and readable.
    static func header(_ reader: ZipReader, _ entry: ZipDirectory.Entry, into result: inout EntryResult) -> Bool {
        let header: ZipReader.Entry?
        do { header = try reader.next() } catch {
            result.findings.append(.error("zip-corrupt", entry.name, "\(error)"))
            return false
        }
        guard let header, header.path == entry.name else {
            result.findings.append(
                .error(
                    "zip-structure", entry.name,
                    "libarchive does not see this entry where the central directory puts it"))
            return false
        }
        if header.isEncrypted {
            result.findings.append(.error("zip-encrypted", entry.name, "entry is encrypted"))
            return false
        }
        return true
    }

    mutating func record(_ entry: ZipDirectory.Entry, size: Int64, sha256: String) {
        hashes[entry.name] = sha256
        rows.append(.init(path: entry.name, size: size, compressedSize: entry.compressedSize, sha256: sha256))
    }

    /// Streams one entry, never trusting its declared size: stops at the first
    /// byte past what it declared, past the entry limit, or past the ratio limit.
    /// Kept entries come back whole (the caller hashes them); the others are
    /// hashed as they stream, and `result.read` holds their size and digest.
    static func readEntry(
        _ reader: ZipReader, _ entry: ZipDirectory.Entry, keepBytes: Bool, into result: inout EntryResult
    ) -> (Int64, Data?)? {
        var count: Int64 = 0
        var body: Data? = keepBytes ? Data() : nil
        var hasher = SHA256()
        var crc = CRC32()
        var head: [UInt8] = []
        var structure =
            entry.name.hasPrefix("media/") || entry.name.hasPrefix("fonts/") ? MediaStructure(path: entry.name) : nil
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
                // A media entry's CRC-32 comes from its structure check, which reads every byte anyway.
                if structure != nil { structure?.update(chunk) } else { crc.update(chunk) }
                if keepBytes { body?.append(contentsOf: chunk) } else { hasher.update(bufferPointer: chunk) }
                if head.count < MediaType.headSize { head += chunk.prefix(MediaType.headSize - head.count) }
                return true
            }
        } catch {
            result.findings.append(.error("zip-corrupt", entry.name, "\(error)"))
            return nil
        }
        if let problem {
            result.findings.append(problem)
            return nil
        }
        if count != entry.uncompressedSize {
            result.findings.append(
                .error("zip-size-mismatch", entry.name, "\(count) bytes, the headers declare \(entry.uncompressedSize)")
            )
            return nil
        }
        let crcValue = structure?.fileCRC ?? crc.value
        // The readers leave the CRC-32 to this check (ZipReader's checksCRC).
        if crcValue != entry.crc32 {
            result.findings.append(
                .error(
                    "zip-corrupt", entry.name,
                    "bad CRC-32: the data's is \(CanonicalHeader.hex(crcValue, 4)), its headers say \(CanonicalHeader.hex(entry.crc32, 4))"
                ))
            return nil
        }
        if !keepBytes { result.read = (count, Digest.hex(hasher.finalize())) }
        if entry.name.hasPrefix("media/") || entry.name.hasPrefix("fonts/"),
            let mismatch = MediaType.mismatch(path: entry.name, head: head)
        {
            result.findings.append(mismatch)
        } else if let corrupt = structure?.finish() {
            result.findings.append(.error("media-corrupt", entry.name, corrupt))
        }
        return (count, body)
    }

    mutating func readManifest(_ data: Data, names: Set<String>) {
        digest = Digest.sha256Hex(data)
        let (parsed, manifestFindings) = BundleManifest.parse(data)
        findings += manifestFindings
        guard let parsed else { return }
        manifest = parsed
        // The header checks run beside the entry readers; their findings go here.
        canonicalFindingsAt = findings.count
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
        if let age = Finding.bundleAge(
            .warning, at: "\(BundleManifest.path)#/created_at", createdAt: parsed.createdAt, maxAge: options.maxAge,
            now: options.now)
        {
            findings.append(age)
        }
    }

    /// How an entry read whole (`size` bytes, `sha256`) differs from its line
    /// in the manifest's `files`. Run by the workers, after the entry's own findings.
    static func listingProblems(_ path: String, size: Int64, sha256: String, manifest: BundleManifest) -> [Finding] {
        if path == BundleManifest.signaturePath { return [] }
        guard let listed = manifest.files[path] else {
            return [.error("manifest-unlisted-file", path, "in the archive but not listed in manifest.json files")]
        }
        var problems: [Finding] = []
        if listed.size != size {
            problems.append(.error("manifest-size-mismatch", path, "\(size) bytes, manifest.json says \(listed.size)"))
        }
        if listed.sha256 != sha256 {
            problems.append(
                .error("manifest-hash-mismatch", path, "sha256 \(sha256), manifest.json says \(listed.sha256)"))
        }
        if path.hasPrefix("media/") || path.hasPrefix("fonts/") {
            let name = path.utf8.split(separator: UInt8(ascii: "/")).last ?? []
            let stem = name.split(separator: UInt8(ascii: "."), maxSplits: 1).first ?? []
            if !stem.elementsEqual(sha256.utf8) {
                problems.append(
                    .error("bundle-asset-name", path, "asset files are named by their sha256 (\(sha256))"))
            }
        }
        return problems
    }

    mutating func finish(names: Set<String>) {
        if let manifestBytes {
            if let policy = options.trust {
                let check = SignatureBlock.verify(
                    signature: signatureBytes, manifest: manifestBytes, manifestAppID: manifest?.appID, policy: policy)
                (signature, findings) = (check.summary, findings + check.findings)
            } else if let raw = options.publicKey, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) {
                let check = SignatureBlock.verify(signature: signatureBytes, manifest: manifestBytes, publicKey: key)
                (signature, findings) = (check.summary, findings + check.findings)
            } else if let signatureBytes {
                signature = SignatureBlock.summary(of: signatureBytes)
            }
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
