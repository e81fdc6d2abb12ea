import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct BundlePull: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pull",
        abstract: "Write a bundle source directory from what the backend resolves now",
        discussion: """
            Resolves each placement for one identity and writes bundle.json, the flows
            as served, and every image and font they reference, downloaded and mapped
            by URL, so bundle build gives a fully offline bundle.
            Rerunning into the same directory rewrites only what changed.
            Exit status: 65 a placement has no flow, or media failed to download or
            are over --max-media-size (unless --allow-missing-media); 69 no request
            reached the backend (unreachable, TLS, proxy).
            """
    )

    @Argument(help: "Placement keys to pull.") var placements: [String]
    @OptionGroup var backend: RemoteOptions
    @Option(name: .shortAndLong, help: "The bundle source directory to write.") var output: String
    @Flag(name: .customLong("allow-missing-media"), help: "Warn, not fail, when media cannot be downloaded.")
    var allowMissingMedia = false
    @Option(name: .customLong("max-media-size"), help: "Largest image or font to accept (default 64MiB).")
    var maxMediaSize: SizeArgument?

    func run() async throws {
        let (client, identity) = (try backend.client(), try backend.identity())
        let result = try await BundlePipeline.pull(
            into: output, client: client, identity: identity, placements: placements,
            allowMissingMedia: allowMissingMedia,
            maxMediaBytes: maxMediaSize?.bytes ?? 64 << 20)
        for f in result.findings { Console.warn(f.body) }
        for file in result.changedFiles { Console.out("wrote \(file)\n") }
        for file in result.removedFiles { Console.out("removed \(file)\n") }
        Console.note("\(output): \(result.changedFiles.count) files written, \(result.removedFiles.count) removed")
    }
}

struct BundleDiff: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Compare a bundle's flows with what the backend resolves now",
        discussion: """
            Per placement: in_sync (same flow id, version, content hash and media),
            changed, missing_on_backend, missing_in_bundle (for --placement keys the
            bundle lacks), or failed.
            Each placement not in sync is a finding with a rule of its own
            (diff-changed, diff-missing-in-bundle, diff-missing-on-backend,
            diff-failed), and so is a bundle older than --max-age (bundle-age).
            With --source DIR (the bundle's source directory), the findings point
            at the files a person edits: a changed flow at its version line, a
            missing placement at bundle.json's placements; without a bundle
            argument, the source's own flows are compared.
            --format sarif, github, junit or gitlab prints the findings for CI to
            show at those lines; text, json and csv print the table.
            Exit status: 0 in sync, 3 not (or older than --max-age), so CI can fail
            a release with stale defaults; 65 an invalid source; 69 no request
            reached the backend (unreachable, TLS, proxy).
            """
    )

    @Argument(help: "The .fpbundle file (optional with --source).") var bundle: String?
    @OptionGroup var backend: RemoteOptions
    @Option(name: .customLong("placement"), help: "Also check a placement the bundle may lack (repeatable).") var extra:
        [String] = []
    @Option(
        name: .customLong("source"),
        help: ArgumentHelp("The bundle's source directory: findings point at its files.", valueName: "dir"))
    var source: String?
    @Option(
        name: .customLong("max-age"), parsing: .unconditional,
        help: "Fail (rule bundle-age) when the bundle's created_at is older than this (e.g. 30d).")
    var maxAge: DurationArgument?
    @OptionGroup var format: FormatOption<DiffReport>

    func validate() throws {
        try maxAge?.check("--max-age", from: DurationArgument("0s", seconds: 0), to: .longest)
        if bundle == nil && source == nil {
            throw ValidationError("name a bundle, or its source directory with --source")
        }
    }

    func run() async throws {
        var check: BundleBuilder.SourceCheck?
        if let source {
            let checked = try BundleBuilder.check(sourceDirectory: source)
            // Findings need its bundle.json; a bundle argument needs no valid flows from it.
            guard checked.source != nil, bundle != nil || checked.isValid else {
                throw FPError.invalid(checked.findings)
            }
            check = checked
        }
        let loaded = try bundle.map { try LoadedBundle.open($0) }
        let (client, identity) = (try backend.client(), try backend.identity())
        let flows = loaded?.flows.mapValues(\.document) ?? check?.flows ?? [:]
        let (rows, reach) = await BundlePipeline.diff(flows, client: client, identity: identity, extra: extra)
        let locations: DiffLocations = check?.source.map { .source($0) } ?? .bundle
        let createdAt = loaded?.createdAt ?? check?.source.map { $0.createdAt ?? BundleBuilder.unknownCreatedAt }
        let findings = locations.findings(rows, createdAt: createdAt, maxAge: maxAge?.seconds)
        let report = DiffReport(
            rows: rows, findings: findings, bundle: bundle, source: check, ageChecked: maxAge != nil,
            workingDirectory: FileManager.default.currentDirectoryPath)
        try format.print(report)
        if reach.reachedNone {
            Console.error(reach.explanation)
            throw Verdict.unavailable
        }
        if !report.inSync || findings.hasErrors { throw Verdict.partial }
    }
}
