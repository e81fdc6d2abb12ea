import FlowPilotCore
import Foundation

/// `bundle inspect`: the manifest's facts, the placements and the kinds of
/// entries as text; one row per entry as CSV; all of it as JSON.
public struct InspectReport: Rendering {
    public struct Placement: Encodable {
        let placement: String
        let flowID: String
        let version: String
        let path: String
        let size: Int64
    }

    public struct Document: Encodable {
        let digest: String
        let appID: String
        let createdAt: String
        let generator: String
        let placements: [Placement]
        let kinds: [String: BundleReport.KindTotal]
        let archiveBytes: Int64
        /// manifest.sig's form and key, read and not checked (validate checks it).
        let signature: SignatureBlock.Summary?
    }

    public let file: String
    public let document: Document
    private let entries: [BundleReport.Entry]
    private let flowOf: [String: (String, BundleManifest.Placement)]

    /// `archiveBytes` is the bundle file's size.
    public init(report: BundleReport, manifest: BundleManifest, digest: String, archiveBytes: Int64) {
        file = report.file
        entries = report.entries
        let sizes = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.path, $0.size) })
        let placements = CanonicalJSON.sortedKeys(manifest.placements.keys).compactMap { key -> Placement? in
            guard let p = manifest.placements[key] else { return nil }
            return Placement(
                placement: key, flowID: p.flowID, version: p.version, path: p.path, size: sizes[p.path] ?? 0)
        }
        flowOf = Dictionary(uniqueKeysWithValues: manifest.placements.map { ($0.value.path, ($0.key, $0.value)) })
        document = Document(
            digest: digest, appID: manifest.appID, createdAt: RFC3339.string(manifest.createdAt),
            generator: manifest.generator, placements: placements, kinds: report.kinds, archiveBytes: archiveBytes,
            signature: report.signature)
    }

    public func text() -> String {
        """
        file        \(file)
        digest      \(document.digest)
        app_id      \(document.appID)
        created_at  \(document.createdAt)
        generator   \(document.generator)
        \(signatureLine)

        """ + placementTable.text() + "\n" + kindTable.text()
    }

    /// The signature's line (with the newline before the tables), empty for an unsigned bundle.
    var signatureLine: String {
        guard let s = document.signature else { return "" }
        switch s.form {
        case .singleKey: return "signature   single-key form, key \(s.keyID)\n"
        case .trustRoot:
            return "signature   trust-root form, key \(s.keyID), sequence \(s.sequence ?? 0), "
                + "expires \(s.expires ?? "-"), root version \(s.rootVersion ?? 0)\n"
        }
    }

    var placementTable: Table {
        Table(
            columns: ["placement", "flow_id", "version", "path", "size"],
            rows: document.placements.map { [$0.placement, $0.flowID, $0.version, $0.path, String($0.size)] })
    }

    var kindTable: Table {
        Table(
            columns: ["kind", "files", "bytes", "compressed_bytes"],
            rows: document.kinds.sorted { $0.key < $1.key }.map { k, v in
                [k, String(v.files), String(v.bytes), String(v.compressedBytes)]
            })
    }

    public var table: Table? {
        Table(
            columns: ["kind", "path", "size", "compressed_size", "sha256", "placement", "flow_id", "version"],
            rows: entries.map { e in
                let flow = flowOf[e.path]
                return [
                    BundleReport.kind(of: e.path), e.path, String(e.size), String(e.compressedSize), e.sha256 ?? "",
                    flow?.0 ?? "", flow?.1.flowID ?? "", flow?.1.version ?? "",
                ]
            })
    }
}

/// `bundle validate`: per bundle (or source directory) its findings and
/// `FILE: ok DIGEST`, or why it could not be checked (that line goes to
/// standard error, before the rest).
public struct ValidateReport: FindingsRendering {
    public struct File: Encodable {
        public let file: String
        public let valid: Bool
        public let digest: String?
        public let findings: [Finding]
        public let error: String?
        /// A source directory (`--source`), not a bundle.
        public let source: Bool?
        /// What manifest.sig is and which key made it (the form validate read).
        public let signature: SignatureBlock.Summary?
        /// The bundle's entries or the source's files, each a JUnit test case.
        let checked: [String]
        /// A source's files that are there (`SourceCheck.presentFiles`).
        let present: Set<String>

        enum CodingKeys: String, CodingKey { case file, valid, digest, findings, error, source, signature }

        public init(
            file: String, valid: Bool, digest: String?, findings: [Finding], error: String?, checked: [String] = [],
            signature: SignatureBlock.Summary? = nil
        ) {
            (self.file, self.valid, self.digest, self.findings, self.error) = (file, valid, digest, findings, error)
            (self.source, self.checked, self.present, self.signature) = (nil, checked, [], signature)
        }

        /// A source directory's findings (`findings`: the check's, with the
        /// age and `--strict` applied).
        public init(check: BundleBuilder.SourceCheck, findings: [Finding]) {
            (self.file, self.valid, self.digest, self.findings) = (check.directory, !findings.hasErrors, nil, findings)
            (self.error, self.source, self.checked, self.present, self.signature) = (
                nil, true, check.checkedFiles, check.presentFiles, nil
            )
        }

        /// A source directory that could not be checked at all.
        public init(source: String, error: String) {
            (self.file, self.valid, self.digest, self.findings, self.error) = (source, false, nil, [], error)
            (self.source, self.checked, self.present, self.signature) = (true, [], [], nil)
        }

        var target: FindingsReport.Target {
            FindingsReport.Target(
                path: file, kind: source == true ? .source : .bundle, findings: findings, cases: checked,
                files: present, error: error)
        }
    }

    public struct Document: Encodable {
        let files: [File]
    }

    public static let command = "bundle validate"
    public static var formats: [OutputFormat] { [.text, .json] }

    public let document: Document
    let workingDirectory: String

    public init(files: [File], workingDirectory: String) {
        document = Document(files: files)
        self.workingDirectory = workingDirectory
    }

    /// Findings and `ok` lines, on standard output: a bundle's as
    /// `FILE: RULE: PATH: MESSAGE`, a source's as `FILE:LINE:COL: error: RULE: MESSAGE`.
    public func text() -> String {
        document.files.map { r in
            let lines = r.target.textLines(command: Self.command, workingDirectory: workingDirectory).map { $0 + "\n" }
            let ok = r.valid ? "\(r.file): ok" + (r.digest.map { " \($0)" } ?? "") + signed(r.signature) + "\n" : ""
            return lines.joined() + ok
        }.joined()
    }

    /// What the ok line says of a signature validate checked: its form and key.
    func signed(_ s: SignatureBlock.Summary?) -> String {
        guard let s else { return "" }
        switch s.form {
        case .singleKey: return " (signed: single-key form, key \(s.keyID))"
        case .trustRoot:
            return
                " (signed: trust-root form, key \(s.keyID), sequence \(s.sequence ?? 0), root version \(s.rootVersion ?? 0))"
        }
    }

    public var findingsReport: FindingsReport {
        FindingsReport(command: Self.command, targets: document.files.map(\.target), workingDirectory: workingDirectory)
    }

    /// The bundles and sources that could not be checked at all, a line each.
    public var leadingDiagnostics: [Diagnostic] { document.files.compactMap(\.error).map(Diagnostic.error) }
}

/// `bundle diff`: per placement, whether the bundle is what the backend
/// serves; text and CSV print the table, and the age finding (the one
/// finding no row shows) after it on standard error.
public struct DiffReport: FindingsRendering {
    public struct Document: Encodable {
        let inSync: Bool
        let placements: [BundlePipeline.DiffRow]
        let findings: [Finding]
    }

    public static let command = "bundle diff"

    public let document: Document
    let target: FindingsReport.Target
    let workingDirectory: String

    /// `source`: the bundle's source directory when given (the findings point
    /// at its files), else `bundle`, the bundle file; `ageChecked`: whether
    /// `--max-age` was given (a JUnit test case of its own).
    public init(
        rows: [BundlePipeline.DiffRow], findings: [Finding], bundle: String?, source: BundleBuilder.SourceCheck?,
        ageChecked: Bool, workingDirectory: String
    ) {
        document = Document(inSync: rows.allSatisfy { $0.status == .inSync }, placements: rows, findings: findings)
        // A JUnit test case per placement compared, and one for the age.
        var caseOf: [String: String] = [:]
        for row in rows { caseOf[row.message] = "placement \(row.placement)" }
        target = FindingsReport.Target(
            path: source?.directory ?? bundle ?? ".", kind: source == nil ? .bundle : .source, findings: findings,
            cases: rows.map { "placement \($0.placement)" } + (ageChecked ? ["bundle age"] : []),
            files: source?.presentFiles ?? [],
            caseOf: { [caseOf] f in caseOf[f.message] ?? "bundle age" })
        self.workingDirectory = workingDirectory
    }

    public var inSync: Bool { document.inSync }

    public func text() -> String { table?.text() ?? "" }

    public var table: Table? {
        Table(
            columns: ["placement", "status", "bundled", "backend", "changed_media"],
            rows: document.placements.map {
                [
                    $0.placement, $0.status.rawValue, $0.bundled ?? "-", $0.backend ?? "-",
                    $0.changedMedia.joined(separator: " "),
                ]
            })
    }

    public var findingsReport: FindingsReport {
        FindingsReport(command: Self.command, targets: [target], workingDirectory: workingDirectory)
    }

    /// `FILE[:LINE:COL]: error: bundle-age: …`, after the table.
    public var trailingDiagnostics: [Diagnostic] {
        let age = FindingsReport.Target(
            path: target.path, kind: target.kind, findings: target.findings.filter { $0.rule == "bundle-age" },
            cases: [], files: target.files)
        return age.textLines(command: Self.command, workingDirectory: workingDirectory).map(Diagnostic.finding)
    }
}
