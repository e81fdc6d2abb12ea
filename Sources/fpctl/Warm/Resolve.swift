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
        let resolution = await warmer.resolve(placement, for: identity)
        for step in resolution.steps { Console.out(Self.describe(step) + "\n") }
        let outcome = resolution.outcome
        guard outcome.state == .warmed, let doc = resolution.document, let tier = outcome.deliverySource else {
            Console.out(
                outcome.state == .noFlow ? "result: no flow\n" : "result: failed (\(outcome.errorCode ?? "error"))\n")
            throw ExitCode(.failure)
        }
        Console.out(
            "result: \(tier.rawValue) (tier \(tier.number)), from_cache \(outcome.fromCache), flow \(doc.id) "
                + "version \(doc.version), \(doc.allImages.count) images, \(doc.fonts.count) fonts\n")
        if let output {
            try reportingErrors {
                let out = try AtomicOutput(destination: output, overwrite: true)
                try CanonicalJSON.prettyData(doc.json).write(to: URL(fileURLWithPath: out.temporaryPath))
                try out.commit()
            }
        }
    }

    /// One line per tier tried.
    static func describe(_ step: TierChain.Step) -> String {
        switch step {
        case .freshHit(let age, let ttl): "tier 0 cache: hit, fresh (age \(age)s of \(ttl)s)"
        case .staleEntry(let age, let ttl): "tier 0 cache: entry is stale (age \(age)s, ttl \(ttl)s)"
        case .noEntry: "tier 0 cache: no entry for this identity"
        case .liveFlow(let ttl): "tier 1 live resolve: ok, cached with ttl \(ttl)s"
        case .liveNoFlow: "tier 1 live resolve: the backend has no flow for this placement"
        case .liveFailed(let failure): "tier 1 live resolve: failed (\(failure.code): \(failure.message))"
        case .staleServed: "tier 2 stale cache: served the last-known-good flow"
        case .staleMissing: "tier 2 stale cache: nothing cached"
        case .bundledServed: "tier 3 bundled default: served from the bundle"
        case .bundledMissing(let given):
            "tier 3 bundled default: " + (given ? "the bundle has no such placement" : "no --bundle given")
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
            throw ExitCode(.failure)
        }
    }
}
