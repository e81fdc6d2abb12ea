import Foundation

/// `manifest.json` of a `.fpbundle` (spec/bundle.md). Its exact bytes are the
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
    public var media: [String: String]
    public var fonts: [String: String]
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
                    .object(["path": .string($0.path), "flow_id": .string($0.flowID), "version": .string($0.version)])
                }),
            "media": .object(media.mapValues { .string($0) }),
            "fonts": .object(fonts.mapValues { .string($0) }),
            "files": .object(
                files.mapValues {
                    .object(["size": .number(Double($0.size)), "sha256": .string($0.sha256)])
                }),
        ])
    }

    public var data: Data { CanonicalJSON.prettyData(json) }
}

extension BundleManifest {
    /// Reads a manifest, reporting every problem as a finding at `manifest.json#/…`.
    static func parse(_ data: Data) -> (BundleManifest?, [Finding]) {
        let at = { (pointer: String) in "\(BundleManifest.path)#\(pointer)" }
        let json: JSONValue
        do { json = try JSONValue.parse(data) } catch {
            return (nil, [.error("manifest-json", BundleManifest.path, "\(error)")])
        }
        var findings: [Finding] = []
        guard case .object = json else {
            return (nil, [.error("manifest-json", BundleManifest.path, "manifest must be a JSON object")])
        }
        if json["format"]?.stringValue != format {
            findings.append(.error("manifest-format", at("/format"), "format must be \"fpbundle\""))
        }
        switch json["format_version"]?.numberValue {
        case Double(formatVersion)?: break
        case let v? where v > Double(formatVersion):
            findings.append(
                .error(
                    "manifest-format-version", at("/format_version"),
                    "unknown format_version \(CanonicalJSON.formatNumber(v)) (this fpctl reads 1); upgrade fpctl"))
            return (nil, findings)
        default:
            findings.append(.error("manifest-format-version", at("/format_version"), "format_version must be 1"))
            return (nil, findings)
        }
        let appID = json["app_id"]?.stringValue ?? ""
        if appID.isEmpty {
            findings.append(.error("manifest-field", at("/app_id"), "app_id must be a non-empty string"))
        }
        let createdAtString = json["created_at"]?.stringValue ?? ""
        let createdAt = RFC3339.parse(createdAtString)
        if createdAt == nil {
            findings.append(.error("manifest-field", at("/created_at"), "created_at must be an RFC 3339 UTC time"))
        }

        func stringMap(_ key: String) -> [String: String] {
            guard let object = json[key]?.objectValue else {
                findings.append(.error("manifest-field", at("/\(key)"), "\(key) must be an object"))
                return [:]
            }
            var out: [String: String] = [:]
            for (k, v) in object {
                if let s = v.stringValue {
                    out[k] = s
                } else {
                    findings.append(.error("manifest-field", at("/\(key)/\(k)"), "must be a string path"))
                }
            }
            return out
        }
        var placements: [String: Placement] = [:]
        if let object = json["placements"]?.objectValue {
            for (key, value) in object {
                guard let path = value["path"]?.stringValue, let flowID = value["flow_id"]?.stringValue,
                    let version = value["version"]?.stringValue
                else {
                    findings.append(
                        .error(
                            "manifest-field", at("/placements/\(key)"),
                            "a placement needs path, flow_id and version strings"))
                    continue
                }
                placements[key] = Placement(path: path, flowID: flowID, version: version)
            }
        } else {
            findings.append(.error("manifest-field", at("/placements"), "placements must be an object"))
        }
        let media = stringMap("media")
        let fonts = stringMap("fonts")
        var files: [String: FileInfo] = [:]
        if let object = json["files"]?.objectValue {
            for (path, value) in object {
                guard let size = value["size"]?.numberValue, size >= 0, size.rounded() == size,
                    let sha = value["sha256"]?.stringValue
                else {
                    findings.append(
                        .error("manifest-field", at("/files/\(path)"), "a file needs an integer size and a sha256"))
                    continue
                }
                files[path] = FileInfo(size: Int64(size), sha256: sha)
            }
        } else {
            findings.append(.error("manifest-field", at("/files"), "files must be an object"))
        }
        guard !findings.hasErrors, let createdAt else { return (nil, findings) }
        return (
            BundleManifest(
                appID: appID, generator: json["generator"]?.stringValue ?? "", createdAt: createdAt,
                placements: placements, media: media, fonts: fonts, files: files), findings
        )
    }
}
