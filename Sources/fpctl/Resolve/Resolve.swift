import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Walk the resolution chain for one placement and explain which tier wins",
        discussion: """
            Prints each tier tried and why it was skipped or won, then the flow summary;
            --format json prints the same trace as one document for scripts.
            With --output, also writes the winning flow's JSON to that file, whole or
            not at all; an existing file is replaced only with --overwrite.
            A flow the backend answered with but the cache could not keep (a read-only
            or full disk) is still served, as the SDK shows it: the trace says so.
            Exit status: 0 a flow was found, 1 none, 69 none and the backend could not
            be reached (unreachable, TLS, proxy; a connect still pending when --timeout
            passes too), 73 the output or the cache cannot be written (the flow is
            printed and written first).
            """
    )

    @Argument(help: "The placement key.") var placement: String
    @OptionGroup var backend: BackendOptions
    @Option(name: .shortAndLong, help: "Write the winning flow's JSON here.") var output: String?
    @Flag(help: "Replace the --output file if it exists.") var overwrite = false
    @OptionGroup var printed: FormatOption<ResolveTrace>

    func run() async throws {
        // The output is checked (and its temporary file made) before the cache is touched.
        let file = try output.map { try AtomicFile.Output(destination: $0, overwrite: overwrite) }
        let (warmer, identity) = (try backend.makeWarmer(media: .none, oneShot: true), try backend.identity())
        let resolution = await warmer.resolve(placement, for: identity)
        warmer.finishWriting()
        var trace = ResolveTrace(resolution, identity: identity)
        trace.noBundleGiven = "no --bundle given"
        Console.out(try trace.rendered(as: printed.format))
        let outcome = resolution.outcome
        guard outcome.state == .warmed, outcome.deliverySource != nil, let doc = resolution.document else {
            throw resolution.reach.reachedNone ? Verdict.unavailable : Verdict.negative
        }
        if let file {
            try file.write(CanonicalJSON.prettyData(doc.json))
            try file.commit()
        }
        if case .liveFlowUnstored(_, let reason)? = resolution.steps.last { throw FPError.cannotWrite(reason) }
    }
}

struct Ready: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ready",
        abstract: "isPlacementReady: exit 0 when a flow is available, 1 when not",
        discussion: """
            A fresh cache hit answers without a network call; otherwise a live resolve
            decides, and leaves the flow warm in the cache.
            The bundled default does not count, as in the SDK. A flow the backend has
            is ready even when the cache cannot keep it (standard error says so).
            Exit status: 0 ready, 1 not ready, 69 not ready and the backend could not
            be reached (unreachable, TLS, proxy; a connect still pending when --timeout
            passes too).
            """
    )

    @Argument(help: "The placement key.") var placement: String
    @OptionGroup var backend: BackendOptions

    func run() async throws {
        let (warmer, identity) = (try backend.makeWarmer(media: .none, oneShot: true), try backend.identity())
        let readiness = await warmer.readiness(placement, for: identity)
        warmer.finishWriting()
        switch readiness {
        case .ready:
            Console.out("ready\n")
        case .readyUnstored(let reason):
            Console.out("ready\n")
            Console.warn("cache-write: \(reason)")
        case .notReady(let failure):
            Console.out("not ready\n")
            var reach = BackendReach()
            if let failure { reach.record(failure) }
            if reach.reachedNone {
                Console.error(reach.explanation)
                throw Verdict.unavailable
            }
            throw Verdict.negative
        }
    }
}
