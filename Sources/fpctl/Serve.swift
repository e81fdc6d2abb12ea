import ArgumentParser
import FlowPilotCore
import FlowPilotServer
import Foundation

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a local resolve backend over bundles, for development and tests",
        discussion: """
            Serves the resolve API (resolve, resolve-batch, media and fonts) for every
            app in the given bundle source directories or .fpbundle files.
            Targeting comes from rules.json in a source directory, or NAME.rules.json
            beside NAME.fpbundle.
            The first line on standard output is the URL it listens on, so scripts can
            start it in the background with --port 0.
            Each request is logged on standard error unless -q is given.
            Faults can be changed at run time with POST /_admin/faults, and request
            counts read with GET /_admin/stats (see docs/serve.md).
            Bad content refuses to start with the findings bundle validate prints.
            So does every mistake in rules.json (rule rules-invalid, naming its JSON
            path): a weight that is not a whole number from 1 to 1000000000, a zero
            total, a flow the bundle lacks, an unknown condition.
            Exit status: 0 after SIGINT or SIGTERM, 1 the address cannot be listened
            on (in use, not permitted, not this machine's), 65 invalid content, 66
            missing content, 64 bad options (a --host that is no address at all).
            """
    )

    @Argument(help: "Bundle source directories or .fpbundle files to serve.")
    var sources: [String]

    @Option(help: "Address to bind.")
    var host = "127.0.0.1"

    @Option(parsing: .unconditional, help: "Port to listen on; 0 picks a free one.")
    var port = 8080

    @Option(parsing: .unconditional, help: "Send cache_ttl_seconds with every flow; omitted when not given.")
    var ttl: Int?

    @Option(name: .customLong("api-key-file"), help: "Require this API key as a bearer token.")
    var apiKeyFile: String?

    @Flag(name: .customLong("rewrite-asset-urls"), help: "Point flows' image and font URLs at this server.")
    var rewriteAssetURLs = false

    @Option(help: "Added latency in milliseconds, fixed (200) or a range (100-300).")
    var latency: LatencyArgument?

    @Option(name: .customLong("fail-rate"), help: "Fraction of resolve requests that fail (0 to 1).")
    var failRate: Double?

    @Option(name: .customLong("fail-status"), help: "Status of injected failures.")
    var failStatus = 503

    @Flag(name: .customLong("no-batch"), help: "Answer the batch endpoint with 404.")
    var noBatch = false

    @Flag(name: .shortAndLong, help: "No request log on standard error.")
    var quiet = false

    func run() async throws {
        // The first SIGTERM or SIGINT is the server's (ResolveServer.run: it
        // stops accepting and finishes its requests); a second ends fpctl at once.
        Signals.onFirst { _ in }
        let server = try ResolveServer(sources: sources, options: try options())
        do {
            // Said once the address is bound: a --host that cannot be bound fails before "serving".
            try await server.run { url in
                for (app, placements) in server.summary {
                    Console.note("serving app \(app): \(placements.joined(separator: ", "))")
                }
                Console.out("\(url)\n")
            }
        } catch  where ResolveServer.isUnknownHost(error) {
            // Not an address at all (256.0.0.1, a name that does not resolve): the option is wrong (64).
            throw FPError.usage("--host \(host): not an IP address or a name that resolves (\(error))")
        } catch {
            throw FPError.failed("cannot serve on \(host):\(port): \(error)")
        }
    }

    /// The server's options, checked before anything starts: an empty address
    /// would bind nowhere after "serving app …".
    func options() throws -> ResolveServer.Options {
        guard !host.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw FPError.usage("--host: give an address to bind, e.g. 127.0.0.1 or 0.0.0.0")
        }
        guard (0...65535).contains(port) else { throw FPError.usage("--port \(port): use 0 to 65535") }
        if let ttl, !TTL.range.contains(ttl) {
            throw FPError.usage("--ttl \(ttl): use \(TTL.range.lowerBound) to \(TTL.range.upperBound) seconds")
        }
        var options = ResolveServer.Options()
        options.host = host
        options.port = port
        options.ttl = ttl
        options.quiet = quiet
        options.rewriteAssetURLs = rewriteAssetURLs
        options.faults.failRate = failRate
        options.faults.failStatus = failStatus
        options.faults.batchDisabled = noBatch ? true : nil
        options.faults.latencyMilliseconds = latency?.milliseconds
        options.apiKey = try apiKeyFile.map(APIKey.read(file:))
        return options
    }
}
