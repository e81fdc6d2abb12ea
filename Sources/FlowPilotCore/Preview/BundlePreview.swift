import Foundation

/// What a bundle shows on a first launch with no network (Tier 3), read from the
/// bundle alone and shaped for drawing: every placement's screens and persistent
/// zones as components, each image and font resolved to the bytes the bundle
/// holds for it, and the bundle's validation findings. It knows nothing of HTML;
/// the executable draws it.
///
/// An invalid bundle still opens when its zip structure was read safely (no
/// `zip-` or `limit-` error, and a manifest): its findings travel with it. A
/// flow that does not parse becomes a placement with a `problem` and no screens.
public struct BundlePreview: Sendable {
    /// An image or font file of the bundle, by its path inside it.
    public struct Asset: Sendable, Equatable {
        public let path: String
        public let type: MediaType?
        public let data: Data
        /// Width and height in pixels, for images whose header says them.
        public let size: ImageSize?
    }

    public enum Action: Sendable, Equatable {
        case purchase(productID: String)
        case restore
        /// `targetIndex` is the screen's position in its flow; nil when the flow has no such screen.
        case navigate(screen: String, targetIndex: Int?)
        case dismiss
        case openLink(url: String)
        case callDelegate(message: String)
        /// A type the schema does not define, or none at all.
        case other(type: String)
    }

    public indirect enum Component: Sendable, Equatable {
        /// `fontAsset` is the bundle path of the named font; nil when the text names none or the bundle lacks it.
        case text(String, font: String?, fontAsset: String?)
        /// `asset` is the bundle path of the image; nil when the bundle lacks it.
        case image(src: String, asset: String?)
        case button(text: String, action: Action)
        case stack([Component])
        case lottie(src: String)
        case video(src: String)
        case spacer
        /// A component type this schema version does not know (a warning in validation).
        case unknown(type: String)
    }

    public struct Screen: Sendable, Equatable {
        public let id: String
        public let components: [Component]
    }

    public struct Zone: Sendable, Equatable {
        /// `navigation_bar`, `footer` or `overlay`.
        public let name: String
        public let components: [Component]
    }

    public struct Placement: Sendable, Equatable {
        public let key: String
        public let path: String
        public let flowID: String
        public let version: String
        public let contentHash: String?
        /// The SHA-256 of the flow file, from the manifest.
        public let fileSHA256: String?
        public let experimentID: String?
        public let variant: String?
        public let screens: [Screen]
        /// The persistent zones with components, in the SDK's order.
        public let zones: [Zone]
        /// Distinct images the flow shows that the bundle holds, and their bytes.
        public let mediaCount: Int
        public let mediaBytes: Int
        /// Distinct fonts the flow declares that the bundle holds, and their bytes.
        public let fontCount: Int
        public let fontBytes: Int
        /// Why the flow cannot be drawn (missing from the archive, not JSON); nil when it can.
        public let problem: String?
    }

    public let file: String
    public let digest: String?
    public let appID: String
    public let createdAt: Date
    /// Validation findings, warnings included, in validate's order.
    public let findings: [Finding]
    /// In manifest order (the manifest's keys are sorted).
    public let placements: [Placement]
    /// Every image and font some placement uses, by bundle path.
    public let assets: [String: Asset]

    /// Rules whose errors mean the archive could not be read safely: nothing is
    /// drawn. A bad CRC (`zip-corrupt`) is not one of them: the entry's bytes are
    /// drawn as they are, under the finding, and an entry that cannot be
    /// decompressed at all refuses the bundle when it is read.
    static func isStructural(_ finding: Finding) -> Bool {
        guard finding.severity == .error, finding.rule != "zip-corrupt" else { return false }
        return finding.rule.hasPrefix("zip-") || finding.rule.hasPrefix("limit-")
    }

    /// Validates the bundle at `path` and reads what its flows show. Throws
    /// `FPError.inputMissing` for a missing file and `FPError.invalid` (validate's
    /// findings) when the archive's structure cannot be read safely.
    public static func open(_ path: String) throws -> BundlePreview {
        let report = try BundleValidator.validate(path)
        // Refused: validate's errors, each under the bundle's name.
        func refused(_ more: [Finding] = []) -> FPError {
            .invalid(
                (report.findings.filter { $0.severity == .error } + more).map { f in
                    var f = f
                    f.path = f.path == "-" ? path : "\(path): \(f.path)"
                    return f
                })
        }
        guard let manifest = report.manifest, !report.findings.contains(where: isStructural) else {
            throw refused(
                report.findings.hasErrors ? [] : [.error("manifest-missing", BundleManifest.path, "no manifest")])
        }
        let contents: [String: Data]
        do { contents = try readEntries(path, wanted: wantedPaths(manifest), manifest: manifest) } catch {
            throw refused([.error("zip-corrupt", "-", "\(error)")])
        }
        var builder = Builder(manifest: manifest, contents: contents)
        let placements = CanonicalJSON.sortedKeys(manifest.placements.keys).compactMap { key in
            manifest.placements[key].map { builder.placement(key: key, $0) }
        }
        return BundlePreview(
            file: path, digest: report.digest, appID: manifest.appID, createdAt: manifest.createdAt,
            findings: report.findings, placements: placements, assets: builder.assets)
    }

    /// One flow drawn as placement `p` of a bundle that maps `media` (URL -> bytes)
    /// and `fonts` (name -> bytes): the same drawing without an archive, for
    /// the fuzzer and unit tests.
    static func single(flow: Data, media: [String: Data] = [:], fonts: [String: Data] = [:]) -> BundlePreview {
        var contents = ["flows/p.json": flow]
        func paths(_ files: [String: Data], _ dir: String, _ ext: String) -> [String: String] {
            var paths: [String: String] = [:]
            for (index, key) in files.keys.sorted().enumerated() {
                paths[key] = "\(dir)/\(index).\(ext)"
                contents[paths[key] ?? ""] = files[key]
            }
            return paths
        }
        let manifest = BundleManifest(
            appID: "fuzz", generator: "", createdAt: Date(timeIntervalSince1970: 0),
            placements: ["p": .init(path: "flows/p.json", flowID: "", version: "")],
            media: paths(media, "media", "png").exactKeys, fonts: paths(fonts, "fonts", "ttf").exactKeys, files: [:])
        var builder = Builder(manifest: manifest, contents: contents)
        let placement = builder.placement(
            key: "p", manifest.placements["p"] ?? .init(path: "", flowID: "", version: ""))
        return BundlePreview(
            file: "fuzz", digest: nil, appID: "fuzz", createdAt: manifest.createdAt, findings: [],
            placements: [placement], assets: builder.assets)
    }

    /// Flows, images and fonts: everything but the manifest, its signature and files it does not map.
    private static func wantedPaths(_ manifest: BundleManifest) -> Set<String> {
        Set(manifest.placements.values.map(\.path)).union(manifest.media.values).union(manifest.fonts.values)
    }

    /// The wanted entries' bytes, each no larger than the manifest says (or the
    /// per-entry limit), whatever its zip headers claim.
    private static func readEntries(
        _ path: String, wanted: Set<String>, manifest: BundleManifest
    ) throws -> [String: Data] {
        var contents: [String: Data] = [:]
        let reader = try ZipReader(path: path, checksCRC: false)
        while let entry = try reader.next() {
            guard wanted.contains(entry.path) else { continue }
            let limit = Int(
                min(manifest.files[entry.path]?.size ?? BundleLimits.maxEntryBytes, BundleLimits.maxEntryBytes))
            var data = Data(capacity: min(limit, 16 << 20))
            try reader.readData { chunk in
                guard data.count + chunk.count <= limit else {
                    throw ArchiveError(message: "\(entry.path): larger than the manifest says (\(limit) bytes)")
                }
                data.append(contentsOf: chunk)
                return true
            }
            contents[entry.path] = data
        }
        return contents
    }
}

/// Turns flow JSON into preview components, collecting the assets they use.
private struct Builder {
    let manifest: BundleManifest
    let contents: [String: Data]
    var assets: [String: BundlePreview.Asset] = [:]

    init(manifest: BundleManifest, contents: [String: Data]) {
        self.manifest = manifest
        self.contents = contents
    }

    mutating func placement(key: String, _ entry: BundleManifest.Placement) -> BundlePreview.Placement {
        var problem: String?
        var json = JSONValue.object([:])
        if let data = contents[entry.path] {
            do { json = try JSONValue.parse(data) } catch { problem = "the flow is not JSON: \(error)" }
        } else {
            problem = "the bundle has no \(entry.path)"
        }
        let fontAssets = fonts(json)
        var scope = FlowScope(screenIDs: (json["screens"]?.arrayValue ?? []).map { $0["id"]?.stringValue ?? "" })
        let screens = (json["screens"]?.arrayValue ?? []).map { screen in
            BundlePreview.Screen(
                id: screen["id"]?.stringValue ?? "",
                components: components(screen["components"], fonts: fontAssets, scope: &scope))
        }
        let zones = FlowDocument.persistentZones.compactMap { name -> BundlePreview.Zone? in
            let list = components(json["persistent_zones"]?[name], fonts: fontAssets, scope: &scope)
            return list.isEmpty ? nil : BundlePreview.Zone(name: name, components: list)
        }
        let fontPaths = Set(fontAssets.values)
        return BundlePreview.Placement(
            key: key, path: entry.path,
            flowID: json["id"]?.stringValue ?? entry.flowID,
            version: json["version"]?.stringValue ?? entry.version,
            contentHash: json["content_hash"]?.stringValue,
            fileSHA256: manifest.files[entry.path]?.sha256,
            experimentID: json["experiment"]?["id"]?.stringValue,
            variant: json["experiment"]?["variant"]?.stringValue,
            screens: screens, zones: zones,
            mediaCount: scope.images.count, mediaBytes: scope.images.reduce(0) { $0 + (assets[$1]?.data.count ?? 0) },
            fontCount: fontPaths.count, fontBytes: fontPaths.reduce(0) { $0 + (assets[$1]?.data.count ?? 0) },
            problem: problem)
    }

    /// Font name -> bundle path, for the fonts the flow declares and the bundle holds.
    private mutating func fonts(_ json: JSONValue) -> [String: String] {
        var result: [String: String] = [:]
        for font in json["fonts"]?.arrayValue ?? [] {
            guard let name = font["name"]?.stringValue, let path = manifest.fonts[ExactName(name)], asset(path) != nil
            else {
                continue
            }
            result[name] = path
        }
        return result
    }

    /// The asset at `path`, read once; nil when the archive lacks it.
    private mutating func asset(_ path: String) -> BundlePreview.Asset? {
        if let known = assets[path] { return known }
        guard let data = contents[path] else { return nil }
        let type = MediaType(extension: BundlePath.normalizedExtension(path))
        let made = BundlePreview.Asset(path: path, type: type, data: data, size: ImageSize(data))
        assets[path] = made
        return made
    }

    /// What a flow's components may refer to: its screens, and the images seen so far.
    struct FlowScope {
        let screenIDs: [String]
        var images = Set<String>()
    }

    private mutating func components(
        _ json: JSONValue?, fonts: [String: String], scope: inout FlowScope
    ) -> [BundlePreview.Component] {
        (json?.arrayValue ?? []).map { component($0, fonts: fonts, scope: &scope) }
    }

    private mutating func component(
        _ json: JSONValue, fonts: [String: String], scope: inout FlowScope
    ) -> BundlePreview.Component {
        let type = json["type"]?.stringValue ?? ""
        let src = json["src"]?.stringValue ?? ""
        switch type {
        case "text":
            let font = json["font"]?.stringValue
            return .text(json["text"]?.stringValue ?? "", font: font, fontAsset: font.flatMap { fonts[$0] })
        case "image":
            let path = manifest.media[ExactName(src)].flatMap { asset($0) }?.path
            if let path { scope.images.insert(path) }
            return .image(src: src, asset: path)
        case "button":
            return .button(text: json["text"]?.stringValue ?? "", action: action(json["action"], scope: scope))
        case "stack": return .stack(components(json["children"], fonts: fonts, scope: &scope))
        case "lottie": return .lottie(src: src)
        case "video": return .video(src: src)
        case "spacer": return .spacer
        default: return .unknown(type: type)
        }
    }

    private func action(_ json: JSONValue?, scope: FlowScope) -> BundlePreview.Action {
        func field(_ name: String) -> String { json?[name]?.stringValue ?? "" }
        switch json?["type"]?.stringValue {
        case "purchase": return .purchase(productID: field("product_id"))
        case "restore": return .restore
        case "navigate":
            let screen = field("screen")
            return .navigate(screen: screen, targetIndex: scope.screenIDs.firstIndex { $0.sameBytes(as: screen) })
        case "dismiss": return .dismiss
        case "open_link": return .openLink(url: field("url"))
        case "call_delegate": return .callDelegate(message: field("message"))
        case let other: return .other(type: other ?? "")
        }
    }
}
