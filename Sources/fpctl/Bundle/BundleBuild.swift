import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct BundleBuild: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "build",
        abstract: "Build a canonical .fpbundle from a bundle source directory",
        discussion: """
            Validates the source first: bundle.json, every flow, and every image and
            font a flow references.
            Only regular files are read: a symbolic link anywhere below the source
            directory is refused (rule source-symlink), so no link can ship a host
            file, and so is a device, FIFO or socket (source-special-file).
            Each image and font must be what its extension says, by its first bytes
            (png, jpg/jpeg, gif, webp, mp4, ttf, otf, woff, woff2; rule
            media-type-mismatch).
            Then writes a zip whose bytes depend only on the source content:
            entries sorted, manifest.json first, mode 0644, and every timestamp set to
            the bundle's created_at (SOURCE_DATE_EPOCH when set, else created_at in
            bundle.json, else 1980-01-01T00:00:00Z).
            Already-compressed media are stored, everything else deflated.
            Prints the bundle digest, the SHA-256 of manifest.json, and its path.
            Findings go to standard error as FILE:LINE:COL: error: RULE: MESSAGE, the
            line and column of the value in the source file (editors and
            terminals make the form clickable); --format puts them on standard
            output in a format CI shows at that line instead (sarif, github,
            junit, gitlab; json adds the digest), and the exit status is the same
            in every format. fpctl-bundle(5) lists the rules.
            Nothing is left behind on failure.
            Exit status: 65 invalid source, 66 missing source, 73 output not written.
            """
    )

    @Argument(help: "The bundle source directory (holds bundle.json).")
    var source: String

    @Option(name: .shortAndLong, help: "The .fpbundle file to write.")
    var output: String

    @Flag(help: "Replace the output file when it exists.")
    var overwrite = false

    @Flag(help: "Treat warnings (unknown component types, unreferenced assets) as errors: nothing is written.")
    var strict = false

    @OptionGroup var format: FormatOption<BuildReport>

    func run() throws {
        let options = BundleBuilder.Options(
            overwrite: overwrite,
            sourceDateEpoch: ProcessInfo.processInfo.environment["SOURCE_DATE_EPOCH"])
        let check = try BundleBuilder.check(sourceDirectory: source, options: options)
        let findings = strict ? check.findings.strict : check.findings
        let valid = !findings.hasErrors
        // The bundle is written only from a valid source; a failure to write
        // it is reported after the findings, in every format.
        var built: Result<BundleBuilder.Result, any Error>?
        if valid { built = Result { try BundleBuilder.build(check, output: output, options: options) } }
        let result = try? built?.get()
        try format.print(
            BuildReport(
                check: check, findings: findings, built: result,
                workingDirectory: FileManager.default.currentDirectoryPath))
        if let result {
            Console.note(
                "built \(result.output): \(result.manifest.placements.count) placements, "
                    + "\(result.manifest.media.count) images, \(result.manifest.fonts.count) fonts, \(result.bytesWritten) bytes"
            )
        }
        if case .failure(let error)? = built { throw error }
        if !valid {
            let errors = findings.count { $0.severity == .error }
            Console.error("\(source): \(errors) error\(errors == 1 ? "" : "s"); nothing was written")
            throw Verdict.invalid
        }
    }
}
