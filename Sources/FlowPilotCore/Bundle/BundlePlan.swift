import Foundation

/// What goes into a bundle, gathered from its source before a byte is written:
/// the flows that validate, every image and font they reference (hashed, named
/// by content, shared when identical), the manifest's maps, and the findings.
struct BundlePlan {
    struct File {
        let archivePath: String
        let size: Int64
        let sha256: String
        let content: Content

        enum Content {
            case bytes(Data)
            /// A source file, and its stamp when it was hashed (nil: racy, hash it again while writing).
            case file(URL, stamp: FileStamp?)
        }
    }

    /// A font as the flows declare it, the first flow that does, and where a
    /// finding about its file points: the first component of that flow naming
    /// it, else its declaration.
    private struct FontUse {
        let url: String
        let sha256: String?
        let flow: String
        let at: String
    }

    let source: BundleSource
    var findings: [Finding]
    private(set) var files: [File] = []
    private var placements: [String: BundleManifest.Placement] = [:]
    /// Placement key -> its valid flow.
    private(set) var documents: [String: FlowDocument] = [:]
    // URLs and font names by their bytes (`ExactName`), as the SDK looks them up in the manifest.
    private var media: [ExactName: String] = [:]
    private var fonts: [ExactName: String] = [:]
    /// Image URL -> the first flow that uses it, and the pointer of that `src`.
    private var imageURLs: [ExactName: (flow: String, pointer: String)] = [:]
    /// Font name -> its declaration.
    private var fontUses: [ExactName: FontUse] = [:]
    /// Flows whose references are not all known (not a JSON object, or a src
    /// or font url that is no URL): no asset is called unused beside them,
    /// and a `rule-not-run` finding names them.
    private var unreadFlows: [String] = []
    /// Archive path -> file: identical content shares one entry.
    private var assetFiles: [String: File] = [:]

    init(source: BundleSource, findings: [Finding]) {
        self.source = source
        self.findings = findings
    }

    /// The source files read: bundle.json, each placement's flow file, each
    /// referenced image and font, in that order.
    var checkedFiles: [String] {
        var seen: Set<String> = []
        let flows = source.placements.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map(\.value)
        let assets = Set(
            imageURLs.keys.compactMap { source.assets[$0] }
                + fontUses.values.compactMap { source.assets[ExactName($0.url)] }
        )
        .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return ([BundleSource.fileName] + flows + assets).filter { seen.insert($0).inserted }
    }

    /// Gives the findings about `bundle.json`, and those made about a flow
    /// after its check (a missing asset, a font conflict), their lines and columns.
    mutating func locateSourceFindings() {
        source.locate(&findings)
    }

    func manifest(generator: String, createdAt: Date) -> BundleManifest {
        BundleManifest(
            appID: source.appID, generator: generator, createdAt: createdAt,
            placements: placements, media: media, fonts: fonts,
            files: Dictionary(
                uniqueKeysWithValues: files.map { ($0.archivePath, .init(size: $0.size, sha256: $0.sha256)) }))
    }

    /// Every placement's flow, validated, in canonical key order. The files are
    /// read, validated and hashed on every core; what they give is recorded in
    /// key order, so findings come out as one thread would give them.
    mutating func addFlows() {
        let order = source.placements.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) })
            .map { (key: $0.key, rel: $0.value) }
        let source = self.source
        let loaded = Parallel.mapSlices(order, minimumPerSlice: 8) { slice in
            slice.map { Self.loadFlow($0.key, $0.rel, source) }
        }
        for (placement, flow) in zip(order, loaded.joined()) {
            record(placement.key, placement.rel, flow)
        }
    }

    /// A placement's flow file, read, validated and hashed, or why it was not.
    private enum LoadedFlow: Sendable {
        case refused(Finding)
        case read(data: Data, sha256: String, doc: FlowDocument?, findings: [Finding], references: FlowReferences?)
    }

    private static func loadFlow(_ key: String, _ rel: String, _ source: BundleSource) -> LoadedFlow {
        guard BundlePath.isCanonical("flows/\(key).json") else {
            return .refused(
                .error(
                    "source-placement-key", "bundle.json#/placements/\(key)",
                    "placement key must be lowercase letters, digits, '.', '_' or '-'"))
        }
        if let problem = source.fileProblem(rel) { return .refused(problem) }
        guard let data = FileManager.default.contents(atPath: source.url(for: rel).path) else {
            return .refused(
                .error(
                    "source-missing-file", "bundle.json#/placements/\(BundleSource.pointerToken(key))",
                    "\(rel): flow file not found"))
        }
        let (doc, findings, references) = FlowDocument.check(data: data, location: rel, positions: true)
        return .read(
            data: data, sha256: doc == nil ? "" : Digest.sha256Hex(data), doc: doc, findings: findings,
            references: references)
    }

    private mutating func record(_ key: String, _ rel: String, _ flow: LoadedFlow) {
        let archivePath = "flows/\(key).json"
        guard case .read(let data, let sha256, let doc, let flowFindings, let references) = flow else {
            if case .refused(let finding) = flow { findings.append(finding) }
            return
        }
        findings += flowFindings
        // What an invalid flow references is checked too: every finding of a
        // source in one run, not one flow's errors and then, fixed, its assets'.
        guard let references else {
            unreadFlows.append(rel)
            return
        }
        if !references.complete { unreadFlows.append(rel) }
        for image in references.images where imageURLs[ExactName(image.url)] == nil {
            imageURLs[ExactName(image.url)] = (rel, image.pointer)
        }
        for (font, pointer) in references.fonts {
            if let other = fontUses[ExactName(font.name)], !other.url.sameBytes(as: font.url) {
                findings.append(
                    .error(
                        "source-font-conflict", "\(rel)#\(pointer)/url",
                        "font '\(font.name)' is \(font.url) here but \(other.url) in \(other.flow)"))
            } else if fontUses[ExactName(font.name)] == nil {
                let at = references.fontUses[ExactName(font.name)] ?? pointer
                fontUses[ExactName(font.name)] = FontUse(
                    url: font.url, sha256: font.sha256, flow: rel, at: "\(rel)#\(at)")
            }
        }
        guard let doc else { return }
        placements[key] = .init(path: archivePath, flowID: doc.id, version: doc.version)
        documents[key] = doc
        files.append(File(archivePath: archivePath, size: Int64(data.count), sha256: sha256, content: .bytes(data)))
    }

    /// The referenced images and fonts (hashed up front, on all cores: most of a
    /// build's reading), and a warning for each asset no flow uses.
    mutating func addAssets(stampTime: Date? = nil) {
        // Only files that pass the source rules are read at all (no symlink is ever followed).
        let referencedFiles = Set(
            imageURLs.keys.compactMap { source.assets[$0] }
                + fontUses.values.compactMap { source.assets[ExactName($0.url)] }
        ).filter { source.fileProblem($0) == nil }
        let digests = BundleBuilder.hashFiles(referencedFiles.map { source.url(for: $0) }, now: stampTime)
        for (url, use) in imageURLs.sorted(by: { $0.key < $1.key }) {
            if let file = addAsset(
                url: url.string, usedAt: "\(use.flow)#\(use.pointer)", folder: "media", digests: digests)
            {
                media[url] = file.archivePath
            }
        }
        for (name, font) in fontUses.sorted(by: { $0.key < $1.key }) {
            guard let file = addAsset(url: font.url, usedAt: font.at, folder: "fonts", digests: digests) else {
                continue
            }
            if let expected = font.sha256, expected != file.sha256 {
                findings.append(
                    .error(
                        "source-font-hash", source.assets[ExactName(font.url)] ?? font.url,
                        "font '\(name)' has sha256 \(file.sha256), the flow declares \(expected)"))
            }
            fonts[name] = file.archivePath
        }
        // With a flow whose references are not all known, an asset only it
        // meant to use would be called unused: noise beside its errors. The
        // rule says so instead, once.
        let referenced = Set(imageURLs.keys).union(fontUses.values.map { ExactName($0.url) })
        if !unreadFlows.isEmpty, !source.assets.isEmpty {
            let flows = unreadFlows.count == 1 ? unreadFlows[0] : "\(unreadFlows[0]) and \(unreadFlows.count - 1) more"
            findings.append(
                .warning(
                    "rule-not-run", "\(BundleSource.fileName)#/assets",
                    "source-unreferenced-asset was not checked: what \(flows) references is not known "
                        + "(its JSON, a src or a font url is wrong); fix its errors and it runs"))
        }
        for (url, rel) in source.assets.sorted(by: { $0.key < $1.key })
        where !referenced.contains(url) && unreadFlows.isEmpty {
            findings.append(
                .warning("source-unreferenced-asset", rel, "\(url) is used by no flow; left out of the bundle"))
        }
        files += assetFiles.values
    }

    private mutating func addAsset(
        url: String, usedAt location: String, folder: String, digests: [String: BundleBuilder.FileDigest]
    ) -> File? {
        guard let rel = source.assets[ExactName(url)] else {
            findings.append(.error("source-missing-asset", location, "\(url) has no local copy in bundle.json#/assets"))
            return nil
        }
        if let problem = source.fileProblem(rel) {
            findings.append(problem)
            return nil
        }
        let fileURL = source.url(for: rel)
        guard let digest = digests[fileURL.path] else {
            findings.append(
                .error(
                    "source-missing-file", "bundle.json#/assets/\(BundleSource.pointerToken(url))",
                    "\(rel): asset file not found"))
            return nil
        }
        if let mismatch = MediaType.mismatch(path: rel, head: digest.head) {
            findings.append(mismatch)
        } else if let corrupt = digest.structureProblem {
            findings.append(.error("media-corrupt", rel, corrupt))
        }
        let (size, sha) = (digest.size, digest.sha256)
        let archivePath = "\(folder)/\(sha).\(BundlePath.normalizedExtension(rel))"
        let file = File(archivePath: archivePath, size: size, sha256: sha, content: .file(fileURL, stamp: digest.stamp))
        assetFiles[archivePath] = file
        return file
    }
}
