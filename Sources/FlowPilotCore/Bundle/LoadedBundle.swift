import Foundation

/// A validated bundle held in memory: its flows by placement and its media and
/// fonts by URL/name. What `serve` serves and what Tier 3 (bundled default) reads.
public struct LoadedBundle: Sendable {
    public struct Flow: Sendable {
        public let data: Data
        public let document: FlowDocument
    }

    public struct Asset: Sendable {
        /// Path inside the bundle, `media/<sha256>.<ext>` or `fonts/<sha256>.<ext>`.
        public let path: String
        public let data: Data
        public let sha256: String
    }

    public let appID: String
    public let digest: String
    public let createdAt: Date
    public let flows: [String: Flow]
    /// Image URL -> asset, by the URL's bytes.
    public let media: [ExactName: Asset]
    /// Font name -> asset, by the name's bytes.
    public let fonts: [ExactName: Asset]
    /// Every asset by its path inside the bundle.
    public let assetsByPath: [String: Asset]

    /// Opens a `.fpbundle` file (validated first; invalid is `FPError.invalid`) or a
    /// bundle source directory (built to a temporary bundle in `$TMPDIR` first, so
    /// a source and the bundle built from it load identically and pass the same
    /// checks; on a read-only root, `TMPDIR` must name a writable directory, or
    /// the caller gives a built `.fpbundle`).
    public static func open(_ path: String) throws -> LoadedBundle {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
            throw FPError.inputMissing("\(path): no such bundle or bundle source")
        }
        guard isDir.boolValue else { return try read(path) }
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent(
            "fpctl-load-\(UUID().uuidString).fpbundle"
        ).path
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        do { _ = try BundleBuilder.build(sourceDirectory: path, output: tmp) } catch FPError.cannotWrite(let reason) {
            throw FPError.cannotWrite(
                "\(path): a bundle source is built into TMPDIR (\(PathName.parent(of: tmp))) before it is loaded, "
                    + "and that failed: \(reason); set TMPDIR to a writable directory, or give a built .fpbundle")
        }
        return try read(tmp)
    }

    private static func read(_ path: String) throws -> LoadedBundle {
        let report = try BundleValidator.validate(path)
        guard report.isValid, let manifest = report.manifest, let digest = report.digest else {
            throw FPError.invalid(
                report.findings.map { f in
                    var f = f
                    f.path = "\(path): \(f.path)"
                    return f
                })
        }
        var contents: [String: Data] = [:]
        let reader = try ZipReader(path: path)
        while let entry = try reader.next() {
            var data = Data()
            try reader.readData { chunk in
                data.append(contentsOf: chunk)
                return true
            }
            contents[entry.path] = data
        }
        let hashes = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.path, $0.sha256 ?? "") })
        func asset(_ p: String) -> Asset? {
            contents[p].map { Asset(path: p, data: $0, sha256: hashes[p] ?? "") }
        }
        var flows: [String: Flow] = [:]
        for (key, placement) in manifest.placements {
            guard let data = contents[placement.path],
                let doc = FlowDocument.validate(data: data, location: placement.path).0
            else { continue }
            flows[key] = Flow(data: data, document: doc)
        }
        let assetsByPath = Dictionary(
            uniqueKeysWithValues: contents.keys
                .filter { $0.hasPrefix("media/") || $0.hasPrefix("fonts/") }
                .compactMap { p in asset(p).map { (p, $0) } })
        return LoadedBundle(
            appID: manifest.appID, digest: digest, createdAt: manifest.createdAt, flows: flows,
            media: manifest.media.compactMapValues { assetsByPath[$0] },
            fonts: manifest.fonts.compactMapValues { assetsByPath[$0] },
            assetsByPath: assetsByPath)
    }
}
