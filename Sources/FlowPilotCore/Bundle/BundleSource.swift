import Foundation

/// A bundle source directory (README, "Bundle sources"): `bundle.json` naming the
/// placements' flow files and the local copies of remote media and fonts.
public struct BundleSource: Sendable {
    public static let fileName = "bundle.json"

    public let directory: URL
    public let appID: String
    /// `created_at` recorded by `bundle pull`, when present.
    public let createdAt: Date?
    /// placement key -> flow file, relative to `directory`.
    public let placements: [String: String]
    /// absolute URL -> asset file, relative to `directory`.
    /// Image URL or font URL -> the file's path in the source, by the URL's bytes.
    public let assets: [ExactName: String]
    /// Where each value of `bundle.json` is, for findings that name one.
    public let positions: JSONPositions?

    /// Reads `bundle.json`. Problems are findings located at `bundle.json#/…`;
    /// a missing directory or file throws `FPError.inputMissing`.
    public static func load(_ path: String) throws -> (BundleSource?, [Finding]) {
        let directory = URL(fileURLWithPath: path, isDirectory: true)
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDir), isDir.boolValue else {
            throw FPError.inputMissing("\(path): no such bundle source directory")
        }
        let manifestURL = directory.appendingPathComponent(fileName)
        if let problem = fileProblem(fileName, in: directory.path) { return (nil, [problem]) }
        guard let data = FileManager.default.contents(atPath: manifestURL.path) else {
            throw FPError.inputMissing("\(manifestURL.path): missing (a bundle source needs a bundle.json)")
        }
        let json: JSONValue
        let positions: JSONPositions?
        do { (json, positions) = try JSONValue.parse(data, positions: true) } catch {
            var finding = Finding.error("source-json", fileName, "\(error)")
            finding.position = (error as? JSONValue.ParseError)?.position(in: data)
            return (nil, [finding])
        }
        var findings: [Finding] = []
        let appID = json["app_id"]?.stringValue ?? ""
        if appID.isEmpty {
            findings.append(.error("source-field", "\(fileName)#/app_id", "app_id must be a non-empty string"))
        }
        var createdAt: Date?
        if let value = json["created_at"] {
            if let s = value.stringValue, let d = RFC3339.parse(s) {
                // Earlier times become 1980 (BundleBuilder); later ones a zip header cannot hold.
                if d.timeIntervalSince1970 < ZipDate.range.upperBound {
                    createdAt = d
                } else {
                    findings.append(
                        .error(
                            "source-field", "\(fileName)#/created_at", "created_at must be before 2108 (zip timestamps)"
                        ))
                }
            } else {
                findings.append(
                    .error("source-field", "\(fileName)#/created_at", "created_at must be an RFC 3339 time"))
            }
        }
        func relativeMap(_ key: String) -> [ExactName: String] {
            guard let object = json[key]?.objectValue else {
                if json[key] != nil || key == "placements" {
                    findings.append(.error("source-field", "\(fileName)#/\(key)", "\(key) must be an object"))
                }
                return [:]
            }
            var out: [ExactName: String] = [:]
            for (k, v) in object {
                guard let rel = v.stringValue, isContained(rel) else {
                    findings.append(
                        .error(
                            "source-path", "\(fileName)#/\(key)/\(k)",
                            "must be a relative path inside the source directory"))
                    continue
                }
                out[k] = rel
            }
            return out
        }
        // Placement keys are checked as paths (`flows/<key>.json`, lowercase ASCII): two that differ only
        // in their bytes are refused here, not merged by a `String` key.
        var placements: [String: String] = [:]
        for (key, rel) in relativeMap("placements").sorted(by: { $0.key < $1.key }) {
            guard placements[key.string] == nil else {
                findings.append(
                    .error(
                        "source-placement-key", "\(fileName)#/placements/\(key)",
                        "placement key must be lowercase letters, digits, '.', '_' or '-'"))
                continue
            }
            placements[key.string] = rel
        }
        if placements.isEmpty && !findings.hasErrors {
            findings.append(.error("source-field", "\(fileName)#/placements", "a bundle needs at least one placement"))
        }
        let assets = relativeMap("assets")
        if let positions { findings.locate(fileName, with: positions) }
        // A wrong app_id or created_at leaves the flows and assets to check:
        // every finding in one run. Without a placement there is nothing to check.
        if placements.isEmpty { return (nil, findings) }
        return (
            BundleSource(
                directory: directory, appID: appID, createdAt: createdAt,
                placements: placements, assets: assets, positions: positions), findings
        )
    }

    /// Why the file at `rel` may not go into a bundle, or nil: every component
    /// below the source directory must be a real directory and the last a
    /// regular file. A symbolic link anywhere (rule `source-symlink`) could
    /// ship a host file (a CI secret, a key) inside a signed bundle; a device,
    /// FIFO or socket (`source-special-file`) is not content. A missing file is
    /// left to the caller (`source-missing-file`).
    public func fileProblem(_ rel: String) -> Finding? {
        Self.fileProblem(rel, in: directory.path)
    }

    static func fileProblem(_ rel: String, in root: String) -> Finding? {
        var path = root
        let components = rel.split(separator: "/")
        for (i, component) in components.enumerated() {
            path += "/" + component
            var info = stat()
            guard lstat(path, &info) == 0 else { return nil }
            let type = info.st_mode & S_IFMT
            if type == S_IFLNK {
                let shown = components[...i].joined(separator: "/")
                return .error(
                    "source-symlink", rel,
                    "\(shown) is a symbolic link; a bundle source holds regular files only, so no link can pull a host file in"
                )
            }
            let last = i == components.count - 1
            if last ? type != S_IFREG : type != S_IFDIR {
                let what = last ? "a regular file" : "a directory"
                return .error("source-special-file", rel, "\(components[...i].joined(separator: "/")) is not \(what)")
            }
        }
        return nil
    }

    /// `bundle-age` (a warning, as `bundle validate` gives it) when the
    /// source's created_at (1980 when it has none) is older than `maxAge`,
    /// at the line of created_at, or of the object that lacks it.
    /// Lines and columns for the findings that have none yet: bundle.json's
    /// from its load, each flow file's parsed again (only the few a finding
    /// made after the flow's own check names: a missing asset at its `src`).
    func locate(_ findings: inout [Finding]) {
        if let positions { findings.locate(Self.fileName, with: positions) }
        let flows = Set(placements.values)
        for file in Set(findings.filter { $0.position == nil }.map { String($0.file) }) where flows.contains(file) {
            guard fileProblem(file) == nil,
                let data = FileManager.default.contents(atPath: url(for: file).path),
                let (_, positions) = try? JSONValue.parse(data, positions: true), let positions
            else { continue }
            findings.locate(file, with: positions)
        }
    }

    public func ageFinding(maxAge: TimeInterval?, now: Date = Date()) -> Finding? {
        var f = Finding.bundleAge(
            .warning, at: "\(Self.fileName)#/created_at", createdAt: createdAt ?? BundleBuilder.unknownCreatedAt,
            maxAge: maxAge, now: now)
        f?.position = positions?.position(of: "/created_at")
        return f
    }

    /// A key as one JSON pointer token (RFC 6901: `~` as `~0`, `/` as `~1`).
    public static func pointerToken(_ key: String) -> String {
        key.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }

    public func url(for relativePath: String) -> URL {
        directory.appendingPathComponent(relativePath)
    }

    /// Relative, no `..`, no empty components: the file stays inside the source.
    private static func isContained(_ rel: String) -> Bool {
        guard !rel.isEmpty, !rel.hasPrefix("/"), !rel.contains("\\") else { return false }
        return !rel.split(separator: "/").contains("..")
    }
}
