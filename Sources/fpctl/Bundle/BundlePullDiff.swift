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
            Exit status: 0 in sync, 3 not, so CI can fail a release with stale defaults;
            69 no request reached the backend (unreachable, TLS, proxy).
            """
    )

    @Argument(help: "The .fpbundle file.") var bundle: String
    @OptionGroup var backend: RemoteOptions
    @Option(name: .customLong("placement"), help: "Also check a placement the bundle may lack (repeatable).") var extra:
        [String] = []
    @OptionGroup var output: FormatOption

    func run() async throws {
        let (loaded, client, identity) = (try LoadedBundle.open(bundle), try backend.client(), try backend.identity())
        let (rows, reach) = await BundlePipeline.diff(loaded, client: client, identity: identity, extra: extra)
        let report = DiffReport(rows: rows)
        try output.print(report)
        if reach.reachedNone {
            Console.error(reach.explanation)
            throw Verdict.unavailable
        }
        if !report.inSync { throw Verdict.partial }
    }
}
