import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct BundleInspect: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show a bundle's digest, app id, placements, and sizes per kind",
        discussion: """
            Validates the bundle while reading it; an invalid bundle prints its
            findings and exits 65.
            The table and JSON formats show the summary.
            The CSV format lists one row per archive entry: kind, path, size,
            compressed size, sha256, and for flows the placement, flow id and version.
            """
    )

    @Argument(help: "The .fpbundle file.")
    var bundle: String

    @OptionGroup var output: FormatOption

    func run() throws {
        let report = try BundleValidator.validate(bundle)
        guard report.isValid, let manifest = report.manifest, let digest = report.digest else {
            throw FPError.invalid(report.findings)
        }
        let summary = BundleSummary(report: report, manifest: manifest, digest: digest)
        switch output.format {
        case .json: Console.out(try JSONOutput.string(summary))
        case .csv: Console.out(summary.entryTable.csv())
        case .table:
            Console.out(
                """
                file        \(bundle)
                digest      \(digest)
                app_id      \(manifest.appID)
                created_at  \(RFC3339.string(manifest.createdAt))
                generator   \(manifest.generator)

                """)
            Console.out("\n" + summary.placementTable.text() + "\n" + summary.kindTable.text())
        }
    }
}

/// What `inspect` reports, shaped for JSON and for the two text tables.
private struct BundleSummary: Encodable {
    struct Placement: Encodable {
        let placement: String
        let flowID: String
        let version: String
        let path: String
        let size: Int64
    }

    let schemaVersion = JSONOutput.schemaVersion
    let digest: String
    let appID: String
    let createdAt: String
    let generator: String
    let placements: [Placement]
    let kinds: [String: BundleReport.KindTotal]
    let archiveBytes: Int64
    private let entries: [BundleReport.Entry]
    private let flowOf: [String: (String, BundleManifest.Placement)]

    private enum CodingKeys: String, CodingKey {
        case schemaVersion, digest, appID, createdAt, generator, placements, kinds, archiveBytes
    }

    init(report: BundleReport, manifest: BundleManifest, digest: String) {
        self.digest = digest
        appID = manifest.appID
        createdAt = RFC3339.string(manifest.createdAt)
        generator = manifest.generator
        entries = report.entries
        let sizes = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.path, $0.size) })
        placements = CanonicalJSON.sortedKeys(manifest.placements.keys).compactMap { key in
            guard let p = manifest.placements[key] else { return nil }
            return Placement(
                placement: key, flowID: p.flowID, version: p.version, path: p.path, size: sizes[p.path] ?? 0)
        }
        flowOf = Dictionary(uniqueKeysWithValues: manifest.placements.map { ($0.value.path, ($0.key, $0.value)) })
        kinds = report.kinds
        archiveBytes = (try? FileManager.default.attributesOfItem(atPath: report.file)[.size] as? Int64) ?? 0
    }

    var placementTable: Table {
        Table(
            columns: ["placement", "flow_id", "version", "path", "size"],
            rows: placements.map { [$0.placement, $0.flowID, $0.version, $0.path, String($0.size)] })
    }

    var kindTable: Table {
        Table(
            columns: ["kind", "files", "bytes", "compressed_bytes"],
            rows: kinds.sorted { $0.key < $1.key }.map { k, v in
                [k, String(v.files), String(v.bytes), String(v.compressedBytes)]
            })
    }

    var entryTable: Table {
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
