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
            With --output, writes the flow JSON to that file instead.
            Exit status: 0 a flow was found, 1 none, 69 none and the backend could not
            be reached (unreachable, TLS, proxy), 73 the output cannot be written.
            """
    )

    @Argument(help: "The placement key.") var placement: String
    @OptionGroup var backend: BackendOptions
    @Option(name: .shortAndLong, help: "Write the winning flow's JSON here.") var output: String?
    @Option(help: "Output format: table (the trace as text) or json.", completion: .list(["table", "json"]))
    var format: OutputFormat = .table

    func run() async throws {
        guard format != .csv else { throw FPError.usage("--format csv: the tier trace is table or json") }
        let (warmer, identity) = (try backend.makeWarmer(media: .none), try backend.identity())
        let resolution = await warmer.resolve(placement, for: identity)
        let outcome = resolution.outcome
        if format == .json {
            Console.out(try JSONOutput.string(Trace(resolution, identity: identity)))
        } else {
            for step in resolution.steps {
                Console.out("tier \(step.tier) \(Self.source(step)): \(Self.reason(step))\n")
            }
        }
        guard outcome.state == .warmed, let doc = resolution.document, let tier = outcome.deliverySource else {
            if format != .json {
                Console.out(
                    outcome.state == .noFlow
                        ? "result: no flow\n" : "result: failed (\(outcome.errorCode ?? "error"))\n")
            }
            throw ExitCode(resolution.reachedNoBackend ? .unavailable : .failure)
        }
        if format != .json {
            Console.out(
                "result: \(tier.rawValue) (tier \(tier.number)), from_cache \(outcome.fromCache), flow \(doc.id) "
                    + "version \(doc.version), \(doc.allImages.count) images, \(doc.fonts.count) fonts\n")
        }
        if let output { try AtomicFile.write(CanonicalJSON.prettyData(doc.json), to: output, overwrite: true) }
    }

    /// Where a step looked.
    static func source(_ step: TierChain.Step) -> String {
        switch step {
        case .freshHit, .staleEntry, .noEntry: "cache"
        case .liveFlow, .liveNoFlow, .liveFailed: "live resolve"
        case .staleServed, .staleMissing: "stale cache"
        case .bundledServed, .bundledMissing: "bundled default"
        }
    }

    /// What a step found, in words.
    static func reason(_ step: TierChain.Step) -> String {
        switch step {
        case .freshHit(let age, let ttl): "hit, fresh (age \(age)s of \(ttl)s)"
        case .staleEntry(let age, let ttl): "entry is stale (age \(age)s, ttl \(ttl)s)"
        case .noEntry: "no entry for this identity"
        case .liveFlow(let ttl): "ok, cached with ttl \(ttl)s"
        case .liveNoFlow: "the backend has no flow for this placement"
        case .liveFailed(let failure): "failed (\(describe(failure)))"
        case .staleServed: "served the last-known-good flow"
        case .staleMissing: "nothing cached"
        case .bundledServed: "served from the bundle"
        case .bundledMissing(let given): given ? "the bundle has no such placement" : "no --bundle given"
        }
    }

    /// `resolve --format json`: each tier tried, what it found and why, and the result.
    struct Trace: Encodable {
        struct Tier: Encodable {
            let tier: Int
            let source: String
            /// served, stale, miss, no_flow or failed.
            let outcome: String
            let reason: String
            var ageSeconds: Int?
            var ttlSeconds: Int?
            var error: ErrorInfo?
        }
        struct ErrorInfo: Encodable {
            let code: String
            let message: String
        }
        struct Result: Encodable {
            let state: String
            let deliverySource: String?
            let tier: Int?
            let fromCache: Bool
            let flowId: String?
            let version: String?
            let images: Int?
            let fonts: Int?
            let error: ErrorInfo?
        }
        let placement: String
        let userId: String
        let fingerprint: String
        let tiers: [Tier]
        let result: Result
        let schemaVersion = JSONOutput.schemaVersion

        init(_ resolution: Warmer.Resolution, identity: Identity) {
            let o = resolution.outcome
            placement = o.placement
            userId = identity.userID
            fingerprint = identity.fingerprint
            tiers = resolution.steps.map(Self.tier)
            let doc = resolution.document
            result = Result(
                state: o.state.rawValue, deliverySource: o.deliverySource?.rawValue, tier: o.deliverySource?.number,
                fromCache: o.fromCache, flowId: doc?.id, version: doc?.version, images: doc?.allImages.count,
                fonts: doc?.fonts.count,
                error: o.errorCode.map { ErrorInfo(code: $0, message: o.errorMessage ?? "") })
        }

        static func tier(_ step: TierChain.Step) -> Tier {
            var t = Tier(
                tier: step.tier, source: Resolve.source(step).replacingOccurrences(of: " ", with: "_"),
                outcome: outcome(step), reason: Resolve.reason(step))
            switch step {
            case .freshHit(let age, let ttl), .staleEntry(let age, let ttl): (t.ageSeconds, t.ttlSeconds) = (age, ttl)
            case .liveFlow(let ttl): t.ttlSeconds = ttl
            case .liveFailed(let failure): t.error = ErrorInfo(code: failure.code, message: failure.message)
            default: break
            }
            return t
        }

        static func outcome(_ step: TierChain.Step) -> String {
            switch step {
            case .freshHit, .liveFlow, .staleServed, .bundledServed: "served"
            case .staleEntry: "stale"
            case .noEntry, .staleMissing, .bundledMissing: "miss"
            case .liveNoFlow: "no_flow"
            case .liveFailed: "failed"
            }
        }
    }
}

extension TierChain.Step {
    /// The tier a step belongs to (0 cache, 1 live, 2 stale, 3 bundled).
    var tier: Int {
        switch self {
        case .freshHit, .staleEntry, .noEntry: 0
        case .liveFlow, .liveNoFlow, .liveFailed: 1
        case .staleServed, .staleMissing: 2
        case .bundledServed, .bundledMissing: 3
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
            Exit status: 0 ready, 1 not ready, 69 not ready and the backend could not
            be reached (unreachable, TLS, proxy).
            """
    )

    @Argument(help: "The placement key.") var placement: String
    @OptionGroup var backend: BackendOptions

    func run() async throws {
        let (warmer, identity) = (try backend.makeWarmer(media: .none), try backend.identity())
        switch await warmer.readiness(placement, for: identity) {
        case .ready:
            Console.out("ready\n")
        case .notReady(let failure):
            Console.out("not ready\n")
            if let failure, failure.isUnavailable {
                Console.error("no request reached the backend: \(describe(failure))")
                throw ExitCode(.unavailable)
            }
            throw ExitCode(.failure)
        }
    }
}
