import Foundation

/// `manifest.json` of a `.fpbundle`. Its exact bytes are the
/// bundle digest's input, so it is written as pretty canonical JSON.
public struct BundleManifest: Sendable, Equatable {
    public static let format = "fpbundle"
    public static let formatVersion = 1
    public static let path = "manifest.json"
    public static let signaturePath = "manifest.sig"

    public struct Placement: Sendable, Equatable {
        public var path: String
        public var flowID: String
        public var version: String
    }

    public struct FileInfo: Sendable, Equatable {
        public var size: Int64
        public var sha256: String
    }

    public var appID: String
    public var generator: String
    public var createdAt: Date
    public var placements: [String: Placement]
    /// Image URL and font name -> archive path, keyed by their bytes (two
    /// spellings of "café" are two fonts, as the SDK reads them).
    public var media: [ExactName: String]
    public var fonts: [ExactName: String]
    public var files: [String: FileInfo]

    public var json: JSONValue {
        .object([
            "format": .string(Self.format),
            "format_version": .number(Double(Self.formatVersion)),
            "app_id": .string(appID),
            "generator": .string(generator),
            "created_at": .string(RFC3339.string(createdAt)),
            "placements": .object(
                placements.mapValues {
                    JSONValue.object([
                        "path": .string($0.path), "flow_id": .string($0.flowID), "version": .string($0.version),
                    ])
                }.exactKeys),
            "media": .object(media.mapValues { .string($0) }),
            "fonts": .object(fonts.mapValues { .string($0) }),
            "files": .object(
                files.mapValues {
                    JSONValue.object(["size": .number(Double($0.size)), "sha256": .string($0.sha256)])
                }.exactKeys),
        ])
    }

    public var data: Data { CanonicalJSON.prettyData(json) }
}

extension BundleManifest {
    /// Reads a manifest, reporting every problem as a finding at `manifest.json#/…`.
    static func parse(_ data: Data) -> (BundleManifest?, [Finding]) {
        let json: JSONValue
        do { json = try JSONValue.parse(data) } catch {
            return (nil, [.error("manifest-json", BundleManifest.path, "\(error)")])
        }
        guard case .object = json else {
            return (nil, [.error("manifest-json", BundleManifest.path, "manifest must be a JSON object")])
        }
        var parser = ManifestParser(json: json)
        guard parser.checkFormat() else { return (nil, parser.findings) }
        let appID = parser.appID()
        let createdAt = parser.createdAt()
        let placements = parser.placements()
        let media = parser.stringMap("media")
        let fonts = parser.stringMap("fonts")
        let files = parser.files()
        guard !parser.findings.hasErrors, let createdAt else { return (nil, parser.findings) }
        let manifest = BundleManifest(
            appID: appID, generator: json["generator"]?.stringValue ?? "", createdAt: createdAt,
            placements: placements, media: media, fonts: fonts, files: files)
        return (manifest, parser.findings)
    }
}

/// The fields of a manifest one by one, each problem a finding at its JSON pointer.
private struct ManifestParser {
    let json: JSONValue
    var findings: [Finding] = []

    private func at(_ pointer: String) -> String { "\(BundleManifest.path)#\(pointer)" }

    private mutating func problem(_ pointer: String, _ message: String) {
        findings.append(.error("manifest-field", at(pointer), message))
    }

    /// `format` and `format_version`; false when the rest cannot be read.
    mutating func checkFormat() -> Bool {
        if json["format"]?.stringValue != BundleManifest.format {
            findings.append(.error("manifest-format", at("/format"), "format must be \"fpbundle\""))
        }
        let supported = Double(BundleManifest.formatVersion)
        switch json["format_version"]?.numberValue {
        case supported?:
            return true
        case let version? where version > supported:
            findings.append(
                .error(
                    "manifest-format-version", at("/format_version"),
                    "unknown format_version \(CanonicalJSON.formatNumber(version)) (this fpctl reads 1); upgrade fpctl")
            )
        default:
            findings.append(.error("manifest-format-version", at("/format_version"), "format_version must be 1"))
        }
        return false
    }

    mutating func appID() -> String {
        let appID = json["app_id"]?.stringValue ?? ""
        if appID.isEmpty { problem("/app_id", "app_id must be a non-empty string") }
        return appID
    }

    mutating func createdAt() -> Date? {
        guard let createdAt = RFC3339.parse(json["created_at"]?.stringValue ?? "") else {
            problem("/created_at", "created_at must be an RFC 3339 UTC time")
            return nil
        }
        guard ZipDate.contains(createdAt) else {
            problem("/created_at", "created_at must fall in 1980-2107, the range of zip timestamps")
            return nil
        }
        return createdAt
    }

    /// `media` or `fonts`: an object of string paths.
    mutating func stringMap(_ key: String) -> [ExactName: String] {
        guard let object = json[key]?.objectValue else {
            problem("/\(key)", "\(key) must be an object")
            return [:]
        }
        var out: [ExactName: String] = [:]
        for (name, value) in object {
            if let path = value.stringValue {
                out[name] = path
            } else {
                problem("/\(key)/\(name)", "must be a string path")
            }
        }
        return out
    }

    mutating func placements() -> [String: BundleManifest.Placement] {
        guard let object = json["placements"]?.objectValue else {
            problem("/placements", "placements must be an object")
            return [:]
        }
        var placements: [String: BundleManifest.Placement] = [:]
        for (key, value) in object {
            guard let path = value["path"]?.stringValue, let flowID = value["flow_id"]?.stringValue,
                let version = value["version"]?.stringValue
            else {
                problem("/placements/\(key)", "a placement needs path, flow_id and version strings")
                continue
            }
            // Keys are paths' names (lowercase ASCII): two that differ only in their bytes are two
            // spellings of one name, which a `String` key would merge without a word.
            guard placements[key.string] == nil else {
                problem("/placements/\(key)", "another placement key is the same text in other bytes")
                continue
            }
            placements[key.string] = .init(path: path, flowID: flowID, version: version)
        }
        return placements
    }

    mutating func files() -> [String: BundleManifest.FileInfo] {
        guard let object = json["files"]?.objectValue else {
            problem("/files", "files must be an object")
            return [:]
        }
        var files: [String: BundleManifest.FileInfo] = [:]
        for (path, value) in object {
            guard let size = value["size"]?.numberValue, size >= 0, size.rounded() == size,
                let sha = value["sha256"]?.stringValue
            else {
                problem("/files/\(path)", "a file needs an integer size and a sha256")
                continue
            }
            guard files[path.string] == nil else {
                problem("/files/\(path)", "another file path is the same text in other bytes")
                continue
            }
            files[path.string] = .init(size: Int64(size), sha256: sha)
        }
        return files
    }
}
