import ArgumentParser
import FlowPilotCore
import Foundation

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Walk the resolution chain for one placement and explain which tier wins",
        discussion: """
            Prints each tier tried and why it was skipped or won, then the flow summary.
            With --output, writes the flow JSON to that file instead.
            Exit status: 0 a flow was found, 1 none, 73 the output cannot be written.
            """
    )

    @Argument(help: "The placement key.") var placement: String
    @OptionGroup var backend: BackendOptions
    @Option(name: .shortAndLong, help: "Write the winning flow's JSON here.") var output: String?

    func run() async throws {
        let (warmer, identity) = try reportingErrors { (try backend.makeWarmer(media: .none), try backend.identity()) }
        let (outcome, steps, doc) = await warmer.explain(placement, for: identity)
        for step in steps { Console.out(step + "\n") }
        guard outcome.state == .warmed, let doc else {
            Console.out(outcome.state == .no_flow ? "result: no flow\n" : "result: failed (\(outcome.errorCode ?? "error"))\n")
            throw ExitCode(1)
        }
        Console.out("result: \(outcome.deliverySource?.rawValue ?? "-") (tier \(outcome.deliverySource?.number ?? -1)), from_cache \(outcome.fromCache), flow \(doc.id) version \(doc.version), \(doc.allImages.count) images, \(doc.fonts.count) fonts\n")
        if let output {
            try reportingErrors {
                let out = try AtomicOutput(destination: output, overwrite: true)
                try CanonicalJSON.prettyData(doc.json).write(to: URL(fileURLWithPath: out.temporaryPath))
                try out.commit()
            }
        }
    }
}

struct Ready: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ready",
        abstract: "isPlacementReady: exit 0 when a flow is available, 1 when not",
        discussion: """
            A fresh cache hit answers without a network call; otherwise a live resolve
            decides, and leaves the flow warm in the cache.
            The bundled default does not count, as in the SDK.
            """
    )

    @Argument(help: "The placement key.") var placement: String
    @OptionGroup var backend: BackendOptions

    func run() async throws {
        let (warmer, identity) = try reportingErrors { (try backend.makeWarmer(media: .none), try backend.identity()) }
        if await warmer.isReady(placement, for: identity) {
            Console.out("ready\n")
        } else {
            Console.out("not ready\n")
            throw ExitCode(1)
        }
    }
}
