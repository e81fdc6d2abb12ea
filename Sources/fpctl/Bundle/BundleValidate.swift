import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct BundleValidate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check .fpbundle files against every rule of the bundle and flow formats",
        discussion: """
            Streams each archive without extracting it and without trusting the sizes
            its headers declare, in bounded memory.
            Every entry's CRC-32 must match its data (rule zip-corrupt) and its
            SHA-256 the manifest's; created_at must be a zip timestamp (1980-2107).
            Media and fonts must be what their extension says, by their first bytes
            (rule media-type-mismatch).
            Prints one line per finding, as FILE: RULE: PATH: MESSAGE, and
            FILE: ok DIGEST for a valid bundle.
            With --source DIR, checks a bundle source directory as bundle build
            would, without writing anything: each finding as
            FILE:LINE:COL: error: RULE: MESSAGE, the line and column of the value in the
            source file, and DIR: ok for a valid source.
            --format sarif, github, junit or gitlab prints the same findings for
            CI to show at their lines (a bundle's findings at the bundle file,
            with the entry and JSON pointer as a logical location); the exit
            status is the same in every format. fpctl-bundle(5) lists the rules.
            --public-key requires manifest.sig by that key, in either form. --trust
            requires the trust-root form, trusted from the app's copy of trust.json:
            the root versions the bundle carries walked from the copy's, the signing
            key delegated and not revoked, app id, expiry and sequence checked (against
            the clock, or FPCTL_NOW); the ok line says which form and key it read.
            Exit status: 0 all valid, 65 a bundle is invalid, 66 a file is missing.
            """
    )

    @Argument(help: "The bundles to check.")
    var bundles: [String] = []

    @Option(
        name: .customLong("source"),
        help: ArgumentHelp(
            "Also check a bundle source directory, as bundle build would (repeatable).", valueName: "dir"))
    var sources: [String] = []

    @Flag(help: "Treat warnings (unknown component types, unreferenced assets, age) as failures.")
    var strict = false

    @Option(
        name: .customLong("max-age"), parsing: .unconditional,
        help: "Warn when the bundle's created_at is older than this (e.g. 60d).")
    var maxAge: DurationArgument?

    func validate() throws {
        try maxAge?.check("--max-age", from: DurationArgument("0s", seconds: 0), to: .longest)
        if publicKey != nil, trust != nil { throw ValidationError("give --public-key or --trust, not both") }
        if minSequence != nil, trust == nil { throw ValidationError("--min-sequence needs --trust") }
        if let minSequence, minSequence < 0 { throw ValidationError("--min-sequence \(minSequence): use 0 or more") }
        if bundles.isEmpty && sources.isEmpty {
            throw ValidationError("name a bundle to check, or a source directory with --source")
        }
    }

    @Option(name: .customLong("public-key"), help: "Require a valid manifest.sig by this key (from bundle keygen).")
    var publicKey: String?

    @Option(
        help: ArgumentHelp(
            "Require manifest.sig in the trust-root form, trusted from this copy of trust.json.",
            valueName: "trust.json"))
    var trust: String?

    @Option(
        name: .customLong("min-sequence"),
        help: "With --trust, refuse a bundle whose sequence is below this (besides the root's min_sequence).")
    var minSequence: Int?

    @OptionGroup var format: FormatOption<ValidateReport>

    func run() throws {
        var results: [ValidateReport.File] = []
        // The first bundle that could not be checked at all (missing,
        // unreadable): its error decides the status, never taken for "missing".
        var unchecked: FPError?
        var options = BundleValidator.Options(strict: strict, maxAge: maxAge?.seconds)
        if let publicKey {
            options.publicKey = try BundleSigning.loadPublic(publicKey).rawRepresentation
        }
        options.now = try Now.date()
        if let trust {
            let anchor = try TrustFile.load(trust)
            options.trust = SignatureBlock.Policy(
                anchor: anchor.roots[anchor.roots.count - 1], minSequence: minSequence ?? 0, now: options.now)
        }
        for bundle in bundles {
            do {
                let report = try BundleValidator.validate(bundle, options: options)
                results.append(
                    ValidateReport.File(
                        file: bundle, valid: report.isValid, digest: report.digest,
                        findings: report.findings, error: nil, checked: report.entries.map(\.path),
                        signature: publicKey != nil || trust != nil ? report.signature : nil))
            } catch let error as FPError {
                unchecked = unchecked ?? error
                results.append(
                    ValidateReport.File(file: bundle, valid: false, digest: nil, findings: [], error: error.description)
                )
            }
        }
        for source in sources {
            do {
                let check = try BundleBuilder.check(sourceDirectory: source)
                var findings = check.findings
                if let age = check.source?.ageFinding(maxAge: options.maxAge) { findings.append(age) }
                if strict { findings = findings.strict }
                results.append(ValidateReport.File(check: check, findings: findings))
            } catch let error as FPError {
                unchecked = unchecked ?? error
                results.append(ValidateReport.File(source: source, error: error.description))
            }
        }
        try format.print(ValidateReport(files: results, workingDirectory: FileManager.default.currentDirectoryPath))
        if let unchecked { throw Verdict.unchecked(unchecked) }
        if results.contains(where: { !$0.valid }) { throw Verdict.invalid }
    }
}
