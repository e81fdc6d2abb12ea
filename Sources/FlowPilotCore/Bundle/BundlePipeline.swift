import Foundation

/// `bundle pull` and `bundle diff`: keep a bundled default in step with what the
/// backend resolves.
public enum BundlePipeline {
    public struct PullResult: Sendable {
        public let changedFiles: [String]
        public let removedFiles: [String]
        public let findings: [Finding]
    }

    /// Resolves each placement for `identity` and writes a bundle source directory
    /// (the layout README "Bundle sources" describes): flows as served, every
    /// image and font downloaded and mapped by URL. Files are rewritten only when
    /// their content changed, and `created_at` moves only when something did.
    /// Media over `maxMediaBytes` or failing to download are errors unless
    /// `allowMissingMedia`.
    public static func pull(
        into directory: String, client: ResolveClient, identity: Identity, placements: [String],
        allowMissingMedia: Bool, maxMediaBytes: Int64 = BundleLimits.maxEntryBytes
    ) async throws -> PullResult {
        let flows = try await resolveFlows(placements, client: client, identity: identity)
        let (assets, mediaFindings) = await downloadAssets(
            of: flows, client: client, allowMissing: allowMissingMedia, limit: maxMediaBytes)
        if mediaFindings.hasErrors { throw FPError.invalid(mediaFindings) }
        var writer = SourceWriter(directory: directory)
        try writer.prepare()
        for (key, doc) in flows { try writer.write("flows/\(key).json", CanonicalJSON.prettyData(doc.json)) }
        for (_, asset) in assets { try writer.write(asset.name, asset.data) }
        try writer.removeAll(except: Set(flows.keys.map { "flows/\($0).json" }).union(assets.values.map(\.name)))
        let bundleJSON: JSONValue = .object([
            "app_id": .string(client.appID),
            "created_at": .string(writer.createdAt()),
            "placements": .object(flows.keys.reduce(into: [:]) { $0[ExactName($1)] = .string("flows/\($1).json") }),
            "assets": .object(assets.mapValues { .string($0.name) }),
        ])
        try writer.write(BundleSource.fileName, CanonicalJSON.prettyData(bundleJSON))
        return PullResult(
            changedFiles: writer.changed.sorted(), removedFiles: writer.removed.sorted(), findings: mediaFindings)
    }

    /// Every placement's flow; any placement without one fails the pull.
    private static func resolveFlows(_ placements: [String], client: ResolveClient, identity: Identity) async throws
        -> [String: FlowDocument]
    {
        var findings: [Finding] = []
        var flows: [String: FlowDocument] = [:]
        var reach = BackendReach()
        for key in placements {
            let result = await client.resolve(key, identity)
            reach.record(result.failure)
            switch result {
            case .flow(let doc, _), .unstored(let doc, _, _): flows[key] = doc
            case .noFlow: findings.append(.error("pull-no-flow", key, "the backend has no flow for this placement"))
            case .failed(let failure): findings.append(.error("pull-failed", key, failure.description))
            }
        }
        // No request got an answer: the backend is not there, which is not the bundle's fault.
        if let error = reach.error { throw error }
        if findings.hasErrors { throw FPError.invalid(findings) }
        return flows
    }

    /// Each distinct image and font URL once, named by its content's SHA-256;
    /// up to `downloadsAtOnce` at a time, so a slow server costs a pull one
    /// download deadline (30 s), not one per asset. Findings in URL order.
    private static func downloadAssets(
        of flows: [String: FlowDocument], client: ResolveClient, allowMissing: Bool, limit: Int64
    ) async -> ([ExactName: (name: String, data: Data)], [Finding]) {
        // Each URL by its bytes: two spellings of one path are two assets, as the SDK asks for them.
        let urls = Set(flows.values.flatMap { ($0.allImages + $0.fonts.map(\.url)).map { ExactName($0) } }).sorted()
            .map(\.string)
        var fetched: [ExactName: MediaDownload.Fetched] = [:]
        await withTaskGroup(of: (String, MediaDownload.Fetched).self) { group in
            var next = urls.makeIterator()
            func start() {
                guard let url = next.next() else { return }
                group.addTask {
                    (
                        url,
                        await MediaDownload.fetch(url, transport: client.transport, limit: limit, pacer: client.pacer)
                    )
                }
            }
            for _ in 0..<downloadsAtOnce { start() }
            for await (url, result) in group {
                fetched[ExactName(url)] = result
                start()
            }
        }
        var assets: [ExactName: (name: String, data: Data)] = [:]
        var findings: [Finding] = []
        for url in urls {
            switch fetched[ExactName(url)] {
            case .success(let bytes)?:
                let ext = BundlePath.normalizedExtension(URL(string: url)?.lastPathComponent ?? "x.bin")
                assets[ExactName(url)] = ("assets/\(Digest.sha256Hex(bytes)).\(ext)", bytes)
            case .failure(let reason)?:
                findings.append(allowMissing ? .warning("pull-media", url, reason) : .error("pull-media", url, reason))
            case nil:
                break
            }
        }
        return (assets, findings)
    }

    private static let downloadsAtOnce = 8

    /// How a bundled placement compares with what the backend resolves now.
    public enum DiffStatus: String, Sendable, Encodable {
        /// Same flow id, version, content hash and media.
        case inSync = "in_sync"
        case changed
        /// The backend resolves a flow for a `--placement` key the bundle lacks.
        case missingInBundle = "missing_in_bundle"
        /// The bundle has a flow the backend no longer resolves.
        case missingOnBackend = "missing_on_backend"
        /// The live resolve failed; `backend` says why.
        case failed
    }

    public struct DiffRow: Sendable, Encodable {
        public let placement: String
        public let status: DiffStatus
        public let bundled: String?
        public let backend: String?
        public let changedMedia: [String]

        enum CodingKeys: String, CodingKey {
            case placement, status, bundled, backend, changedMedia
        }
    }

    /// Per placement, whether the bundled flow is what the backend resolves now:
    /// same id, version and content hash, same media.
    /// `reach` tells whether any of its requests reached the backend.
    public static func diff(_ bundle: LoadedBundle, client: ResolveClient, identity: Identity, extra: [String]) async
        -> (rows: [DiffRow], reach: BackendReach)
    {
        await diff(bundle.flows.mapValues(\.document), client: client, identity: identity, extra: extra)
    }

    /// `diff` over flows in hand (a bundle's, or a source directory's).
    public static func diff(
        _ flows: [String: FlowDocument], client: ResolveClient, identity: Identity, extra: [String]
    ) async -> (rows: [DiffRow], reach: BackendReach) {
        var rows: [DiffRow] = []
        var reach = BackendReach()
        // The placements' requests at once (an unreachable backend costs one request's retries, not
        // one per placement); the rows in placement order.
        let keys = Set(flows.keys).union(extra).sorted()
        let answers = await withTaskGroup(of: (String, LiveResult).self) { group in
            for key in keys { group.addTask { (key, await client.resolve(key, identity)) } }
            var answers: [String: LiveResult] = [:]
            for await (key, live) in group { answers[key] = live }
            return answers
        }
        for key in keys {
            let bundled = flows[key]
            guard let live = answers[key] else { continue }
            reach.record(live.failure)
            func describe(_ d: FlowDocument) -> String {
                "\(d.id)/\(d.version) \(d.contentHash ?? FlowDocument.computeContentHash(d.json))"
            }
            switch (bundled, live) {
            case (nil, .flow(let doc, _)), (nil, .unstored(let doc, _, _)):
                rows.append(
                    DiffRow(
                        placement: key, status: .missingInBundle, bundled: nil, backend: describe(doc), changedMedia: []
                    ))
            case (nil, _):
                continue
            case (let b?, .noFlow):
                rows.append(
                    DiffRow(
                        placement: key, status: .missingOnBackend, bundled: describe(b), backend: nil, changedMedia: [])
                )
            case (let b?, .failed(let failure)):
                rows.append(
                    DiffRow(
                        placement: key, status: .failed, bundled: describe(b), backend: failure.description,
                        changedMedia: []))
            case (let b?, .flow(let doc, _)), (let b?, .unstored(let doc, _, _)):
                let media = Set((b.allImages + b.fonts.map(\.url)).map { ExactName($0) }).symmetricDifference(
                    (doc.allImages + doc.fonts.map(\.url)).map { ExactName($0) }
                ).sorted().map(\.string)
                let same = describe(b) == describe(doc) && media.isEmpty
                rows.append(
                    DiffRow(
                        placement: key, status: same ? .inSync : .changed, bundled: describe(b), backend: describe(doc),
                        changedMedia: media))
            }
        }
        return (rows, reach)
    }
}

extension BundlePipeline.DiffRow {
    /// The rule a placement not in sync breaks (`diff-changed`, …); nil in sync.
    public var rule: String? {
        switch status {
        case .inSync: nil
        case .changed: "diff-changed"
        case .missingInBundle: "diff-missing-in-bundle"
        case .missingOnBackend: "diff-missing-on-backend"
        case .failed: "diff-failed"
        }
    }

    /// What the finding says.
    public var message: String {
        switch status {
        case .inSync: "in sync"
        case .changed:
            "placement '\(placement)': the bundle has \(bundled ?? "-"), the backend serves \(backend ?? "-")"
                + (changedMedia.isEmpty ? "" : "; media differ: \(changedMedia.joined(separator: " "))")
        case .missingInBundle:
            "placement '\(placement)': the backend serves \(backend ?? "-"), the bundle has no flow for it"
        case .missingOnBackend:
            "placement '\(placement)': the bundle has \(bundled ?? "-"), the backend resolves no flow for it"
        case .failed: "placement '\(placement)': the live resolve failed: \(backend ?? "-")"
        }
    }
}

/// Where a diff's findings point: inside a bundle (its entries, `manifest.json`),
/// or, with a source directory, at the files a person edits.
public enum DiffLocations: Sendable {
    case bundle
    /// The source directory: placement key -> flow file, and bundle.json's positions.
    case source(BundleSource)

    /// One finding per placement not in sync, and `bundle-age` (an error here)
    /// when `createdAt` is older than `maxAge` at `now`.
    public func findings(
        _ rows: [BundlePipeline.DiffRow], createdAt: Date?, maxAge: TimeInterval?, now: Date = Date()
    ) -> [Finding] {
        var out: [Finding] = []
        for row in rows {
            guard let rule = row.rule else { continue }
            out.append(.error(rule, path(of: row), row.message))
        }
        let at = if case .source = self { BundleSource.fileName } else { BundleManifest.path }
        if let createdAt,
            let age = Finding.bundleAge(
                .error, at: "\(at)#/created_at", createdAt: createdAt, maxAge: maxAge, now: now,
                advice: "; pull and build it again")
        {
            out.append(age)
        }
        if case .source(let source) = self { source.locate(&out) }
        return out
    }

    /// The file and JSON pointer a row's finding names: the flow's `/version`
    /// for a changed flow, the placements object for one the bundle lacks.
    private func path(of row: BundlePipeline.DiffRow) -> String {
        let key = BundleSource.pointerToken(row.placement)
        switch self {
        case .bundle:
            return row.status == .missingInBundle
                ? "\(BundleManifest.path)#/placements/\(key)" : "flows/\(row.placement).json"
        case .source(let source):
            guard row.status != .missingInBundle, let rel = source.placements[row.placement] else {
                return "\(BundleSource.fileName)#/placements/\(key)"
            }
            return row.status == .changed ? "\(rel)#/version" : rel
        }
    }

}

/// Writes a bundle source directory file by file, rewriting only what changed
/// (atomically) and removing what an earlier pull wrote that is no longer part
/// of it: the flows and assets the `bundle.json` found there names. Files it
/// does not name (a person's own, in `assets/` or `flows/` too) are left alone.
private struct SourceWriter {
    let directory: String
    private(set) var changed: [String] = []
    private(set) var removed: [String] = []
    /// The files the source's `bundle.json` named before this pull.
    private var earlier: Set<String> = []

    init(directory: String) { self.directory = directory }

    /// The source's folders, each directory made synced into its parent
    /// (`AtomicFile.makeDirectory`), so the files published in them stay
    /// reachable; and what the earlier pull wrote.
    mutating func prepare() throws {
        for folder in ["flows", "assets"] {
            do { try AtomicFile.makeDirectory("\(directory)/\(folder)") } catch {
                throw FPError.cannotWrite("\(directory): cannot create (\(error))")
            }
        }
        if let data = FileManager.default.contents(atPath: "\(directory)/\(BundleSource.fileName)"),
            let old = try? JSONValue.parse(data)
        {
            let named =
                (old["placements"]?.objectValue?.values ?? [:].values).compactMap(\.stringValue)
                + (old["assets"]?.objectValue?.values ?? [:].values).compactMap(\.stringValue)
            // Only a plain name in flows/ or assets/: never a path out of them.
            earlier = Set(
                named.filter { rel in
                    let parts = rel.split(separator: "/", omittingEmptySubsequences: false)
                    return parts.count == 2 && ["flows", "assets"].contains(parts[0]) && !parts[1].isEmpty
                        && parts[1] != "." && parts[1] != ".."
                })
        }
    }

    mutating func write(_ rel: String, _ data: Data) throws {
        let path = "\(directory)/\(rel)"
        if FileManager.default.contents(atPath: path) == data { return }
        try AtomicFile.write(data, to: path, overwrite: true)
        changed.append(rel)
    }

    /// Removes the files the earlier pull wrote that are not in `keep`; one that
    /// cannot be removed fails the pull, naming it.
    mutating func removeAll(except keep: Set<String>) throws {
        for rel in earlier.subtracting(keep).sorted() {
            if unlink("\(directory)/\(rel)") == 0 {
                removed.append(rel)
            } else if errno != ENOENT {
                throw FPError.cannotWrite("\(directory)/\(rel): cannot remove it: \(Errno.describe(errno))")
            }
        }
        if !removed.isEmpty {
            for folder in ["flows", "assets"] { try AtomicFile.syncDirectory("\(directory)/\(folder)") }
        }
    }

    /// Now, unless nothing changed: then the `created_at` the source already records.
    func createdAt() -> String {
        let manifestPath = "\(directory)/\(BundleSource.fileName)"
        if changed.isEmpty && removed.isEmpty,
            let old = FileManager.default.contents(atPath: manifestPath).flatMap({ try? JSONValue.parse($0) }),
            let previous = old["created_at"]?.stringValue
        {
            return previous
        }
        return RFC3339.string(Date())
    }
}
