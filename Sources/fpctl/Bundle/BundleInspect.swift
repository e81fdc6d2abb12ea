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

    @OptionGroup var output: FormatOption<InspectReport>

    func run() throws {
        let report = try BundleValidator.validate(bundle)
        guard report.isValid, let manifest = report.manifest, let digest = report.digest else {
            throw FPError.invalid(report.findings)
        }
        let bytes = (try? FileManager.default.attributesOfItem(atPath: bundle)[.size] as? Int64) ?? 0
        try output.print(InspectReport(report: report, manifest: manifest, digest: digest, archiveBytes: bytes))
    }
}
