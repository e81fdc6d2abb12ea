import ArgumentParser
import FlowPilotCore

/// The root command; `Entry` runs it.
struct FPCTL: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fpctl",
        abstract: "Bundled defaults, cache directories and warmups for the FlowPilot SDK",
        discussion: """
            fpctl is the build-and-ops toolkit around the FlowPilot mobile SDK.
            Data goes to standard output; warnings and errors to standard error.
            Exit status: 0 success, 1 unexpected failure, 64 usage error,
            65 invalid data (a bundle or flow breaks a rule),
            66 an input file or directory is missing,
            73 the output cannot be written;
            warm adds 3 (some placements failed) and 69 (no request reached the
            backend: unreachable, TLS or proxy failure);
            bundle diff exits 3 when the bundle is out of step with the backend.
            """,
        version: FPVersion.current,
        subcommands: [
            BundleCommand.self, CacheCommand.self, Serve.self, Warm.self, Report.self, Resolve.self, Ready.self,
            TrustCommand.self,
        ]
    )
}
