import Crypto
import Foundation

/// Builds the canonical `.fpbundle` of spec/bundle.md from a source directory.
public enum BundleBuilder {
    public struct Options: Sendable {
        public var overwrite = false
        /// `SOURCE_DATE_EPOCH`, when the caller's environment sets it.
        public var sourceDateEpoch: String?
        public var generator = "fpctl \(FPVersion.current)"
        public init(overwrite: Bool = false, sourceDateEpoch: String? = nil) {
            self.overwrite = overwrite
            self.sourceDateEpoch = sourceDateEpoch
        }
    }

    public struct Result: Sendable {
        public let output: String
        public let digest: String
        public let manifest: BundleManifest
        /// Warnings met on the way (e.g. assets no flow references, left out).
        public let warnings: [Finding]
        public let bytesWritten: Int64
    }

    /// The age-unknown timestamp: 1980-01-01T00:00:00Z, the earliest a zip can hold.
    public static let unknownCreatedAt = Date(timeIntervalSince1970: 315_532_800)

    private struct PlannedFile {
        let archivePath: String
        let size: Int64
        let sha256: String
        let content: Content
        enum Content {
            case bytes(Data)
            case file(URL)
        }
    }

    public static func build(sourceDirectory: String, output: String, options: Options = .init()) throws -> Result {
        let (loaded, sourceFindings) = try BundleSource.load(sourceDirectory)
        guard let source = loaded else { throw FPError.invalid(sourceFindings) }
        let createdAt = try resolveCreatedAt(source: source, options: options)
        var findings = sourceFindings
        var files: [PlannedFile] = []
        var placements: [String: BundleManifest.Placement] = [:]
        var imageURLs: [String: String] = [:]  // url -> first flow that uses it
        var fontURLs: [String: (url: String, sha256: String?, flow: String)] = [:]

        for key in CanonicalJSON.sortedKeys(source.placements.keys) {
            guard let rel = source.placements[key] else { continue }
            let archivePath = "flows/\(key).json"
            guard BundlePath.isCanonical(archivePath) else {
                findings.append(
                    .error(
                        "source-placement-key", "bundle.json#/placements/\(key)",
                        "placement key must be lowercase letters, digits, '.', '_' or '-'"))
                continue
            }
            guard let data = FileManager.default.contents(atPath: source.url(for: rel).path) else {
                findings.append(
                    .error("source-missing-file", rel, "flow file not found (bundle.json#/placements/\(key))"))
                continue
            }
            let (doc, flowFindings) = FlowDocument.validate(data: data, location: rel)
            findings += flowFindings
            guard let doc else { continue }
            placements[key] = .init(path: archivePath, flowID: doc.id, version: doc.version)
            files.append(
                PlannedFile(
                    archivePath: archivePath, size: Int64(data.count),
                    sha256: Digest.sha256Hex(data), content: .bytes(data)))
            for url in doc.allImages where imageURLs[url] == nil { imageURLs[url] = rel }
            for font in doc.fonts {
                if let other = fontURLs[font.name], other.url != font.url {
                    findings.append(
                        .error(
                            "source-font-conflict", rel,
                            "font '\(font.name)' is \(font.url) here but \(other.url) in \(other.flow)"))
                } else {
                    fontURLs[font.name] = (font.url, font.sha256, rel)
                }
            }
        }

        var media: [String: String] = [:]
        var fonts: [String: String] = [:]
        var assetFiles: [String: PlannedFile] = [:]  // archive path -> file (identical content shares one entry)
        // Hash every referenced asset up front, on all cores: this is most of a build's reading.
        let referencedFiles = Set(
            imageURLs.keys.compactMap { source.assets[$0] } + fontURLs.values.compactMap { source.assets[$0.url] })
        let digests = hashFiles(referencedFiles.map { source.url(for: $0) })
        func addAsset(url: String, usedBy flow: String, folder: String) -> PlannedFile? {
            guard let rel = source.assets[url] else {
                findings.append(.error("source-missing-asset", flow, "\(url) has no local copy in bundle.json#/assets"))
                return nil
            }
            let fileURL = source.url(for: rel)
            guard let (size, sha) = digests[fileURL.path] else {
                findings.append(.error("source-missing-file", rel, "asset file not found (bundle.json#/assets)"))
                return nil
            }
            let archivePath = "\(folder)/\(sha).\(BundlePath.normalizedExtension(rel))"
            let planned = PlannedFile(archivePath: archivePath, size: size, sha256: sha, content: .file(fileURL))
            assetFiles[archivePath] = planned
            return planned
        }
        for url in CanonicalJSON.sortedKeys(imageURLs.keys) {
            if let usedBy = imageURLs[url], let planned = addAsset(url: url, usedBy: usedBy, folder: "media") {
                media[url] = planned.archivePath
            }
        }
        for name in CanonicalJSON.sortedKeys(fontURLs.keys) {
            guard let font = fontURLs[name], let planned = addAsset(url: font.url, usedBy: font.flow, folder: "fonts")
            else { continue }
            if let expected = font.sha256, expected != planned.sha256 {
                findings.append(
                    .error(
                        "source-font-hash", source.assets[font.url] ?? font.url,
                        "font '\(name)' has sha256 \(planned.sha256), the flow declares \(expected)"))
            }
            fonts[name] = planned.archivePath
        }
        let referenced = Set(imageURLs.keys).union(fontURLs.values.map(\.url))
        for url in CanonicalJSON.sortedKeys(source.assets.keys) where !referenced.contains(url) {
            findings.append(
                .warning(
                    "source-unreferenced-asset", source.assets[url] ?? url,
                    "\(url) is used by no flow; left out of the bundle"))
        }
        files += assetFiles.values

        try BundleLimits.check(sizes: files.map { ($0.archivePath, $0.size) }, findings: &findings)
        if findings.hasErrors { throw FPError.invalid(findings) }

        let manifest = BundleManifest(
            appID: source.appID, generator: options.generator, createdAt: createdAt,
            placements: placements, media: media, fonts: fonts,
            files: Dictionary(
                uniqueKeysWithValues: files.map { ($0.archivePath, .init(size: $0.size, sha256: $0.sha256)) }))
        let manifestData = manifest.data

        let out = try AtomicOutput(destination: output, overwrite: options.overwrite)
        let mtime = Int64(createdAt.timeIntervalSince1970)
        // Files are hashed again as they are written (on a second core), so one
        // changed since planning fails the build instead of producing a lying manifest.
        let rehash = HashPipeline()
        var streamed: [(id: Int, file: PlannedFile)] = []
        do {
            let writer = try ZipWriter(path: out.temporaryPath)
            try writer.addFile(path: BundleManifest.path, size: Int64(manifestData.count), mtime: mtime, store: false) {
                sink in
                try manifestData.withUnsafeBytes { try sink($0) }
            }
            for file in files.sorted(by: { $0.archivePath.utf8.lexicographicallyPrecedes($1.archivePath.utf8) }) {
                try writer.addFile(
                    path: file.archivePath, size: file.size, mtime: mtime,
                    store: BundlePath.isStored(file.archivePath)
                ) { sink in
                    switch file.content {
                    case .bytes(let data): try data.withUnsafeBytes { try sink($0) }
                    case .file(let url):
                        let id = streamed.count
                        streamed.append((id, file))
                        try streamFile(url, id: id, pipeline: rehash, into: sink)
                    }
                }
            }
            try writer.close()
        } catch let error as ArchiveError {
            throw FPError.cannotWrite("\(output): \(error.message)")
        }
        let rehashed = rehash.drain()
        for (id, file) in streamed where rehashed[id] != file.sha256 {
            throw FPError.cannotWrite(
                "\(file.archivePath): its source changed while the bundle was being built; nothing was written")
        }
        try out.commit()
        let written = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int64) ?? 0
        return Result(
            output: output, digest: Digest.sha256Hex(manifestData), manifest: manifest,
            warnings: findings.filter { $0.severity == .warning }, bytesWritten: written)
    }

    static func resolveCreatedAt(source: BundleSource, options: Options) throws -> Date {
        if let epoch = options.sourceDateEpoch, !epoch.isEmpty {
            guard let seconds = Int64(epoch), seconds >= 315_532_800, seconds < 4_354_819_200 else {
                throw FPError.usage(
                    "SOURCE_DATE_EPOCH=\(epoch): must be whole seconds between 1980 and 2107 (the zip date range)")
            }
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        if let created = source.createdAt {
            // Zip dates have a 2-second resolution and start in 1980; keep the manifest honest about that.
            let seconds = max(315_532_800, Int64(created.timeIntervalSince1970))
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        return unknownCreatedAt
    }

    private static let chunkSize = 1 << 20

    static func hashFile(_ url: URL) throws -> (Int64, String) {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        var size: Int64 = 0
        while let chunk = try handle.read(upToCount: chunkSize), !chunk.isEmpty {
            hasher.update(data: chunk)
            size += Int64(chunk.count)
        }
        return (size, Digest.hex(hasher.finalize()))
    }

    /// Hashes files concurrently; a file that cannot be read is absent from the result.
    static func hashFiles(_ urls: [URL]) -> [String: (Int64, String)] {
        let results = UnsafeMutableBufferPointer<(Int64, String)?>.allocate(capacity: urls.count)
        results.initialize(repeating: nil)
        defer { results.deallocate() }
        let box = UncheckedSendable(results)
        DispatchQueue.concurrentPerform(iterations: urls.count) { i in
            box.value[i] = try? hashFile(urls[i])
        }
        var out: [String: (Int64, String)] = [:]
        for (i, url) in urls.enumerated() { if let r = results[i] { out[url.path] = r } }
        return out
    }

    /// Streams a file into the archive, handing each block to `pipeline` as well.
    private static func streamFile(
        _ url: URL, id: Int, pipeline: HashPipeline,
        into sink: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        while let chunk = try handle.read(upToCount: chunkSize), !chunk.isEmpty {
            try chunk.withUnsafeBytes { block in
                pipeline.update(id, block)
                try sink(block)
            }
        }
        pipeline.finish(id)
    }
}

/// For handing a buffer whose slots are written by distinct iterations of
/// `concurrentPerform` (never the same slot twice) across the Sendable check.
struct UncheckedSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
