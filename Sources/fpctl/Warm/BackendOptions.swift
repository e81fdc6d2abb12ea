import ArgumentParser
import FlowPilotCore
import Foundation

/// The backend and the identity to resolve for: shared by warm, resolve, ready,
/// bundle pull and bundle diff.
struct RemoteOptions: ParsableArguments {
    @Option(name: .customLong("api-url"), help: "The resolve backend's base URL.") var apiURL: String
    @Option(name: .customLong("app-id"), help: "The app id.") var appID: String
    @Option(name: .customLong("api-key-file"), help: "File holding the API key (default: $FLOWPILOT_API_KEY).")
    var apiKeyFile: String?
    @Option(name: .customLong("user-id"), help: "The identity's user id (default: anonymous).") var userID: String = ""
    @Option(
        name: .customLong("attribute"),
        help: "A targeting attribute, key=value (repeatable); numbers and true/false are typed.")
    var attributes: [String] = []
    @Option(
        name: .customLong("cacert"),
        help: ArgumentHelp(
            "A PEM file of CA certificates to trust besides the system's (or SSL_CERT_FILE's).", valueName: "file"))
    var caFile: String?
    @Option(
        help: ArgumentHelp(
            "An http:// proxy for every request (default: $HTTPS_PROXY, $HTTP_PROXY, $ALL_PROXY; $NO_PROXY still applies).",
            valueName: "url"))
    var proxy: String?

    func identity() throws -> Identity {
        var attrs: [String: JSONValue] = [:]
        for pair in attributes {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw FPError.usage("--attribute \(pair): use key=value")
            }
            let key = String(pair[..<eq])
            let raw = String(pair[pair.index(after: eq)...])
            attrs[key] = Self.typed(raw)
        }
        return Identity(userID: userID, attributes: attrs)
    }

    /// `true`/`false` as booleans, numbers as numbers, anything else a string.
    static func typed(_ raw: String) -> JSONValue {
        switch raw {
        case "true": .bool(true)
        case "false": .bool(false)
        default: Double(raw).map(JSONValue.number) ?? .string(raw)
        }
    }

    /// The key: from --api-key-file, else FLOWPILOT_API_KEY. Never printed.
    func apiKey() throws -> String? {
        try apiKeyFile.map(APIKey.read(file:)) ?? APIKey.fromEnvironment()
    }

    /// `connections`: HTTP/1.1 connections per host, the requests that can be
    /// in flight at once (nil: the transport's default).
    func client(retries: Int = 2, connections: Int? = nil, rate: RequestPacer.Rate? = nil) throws -> ResolveClient {
        guard URL(string: apiURL)?.scheme?.hasPrefix("http") == true else {
            throw FPError.usage("--api-url \(apiURL): use an http(s) URL")
        }
        var settings = TransportSettings(caFile: caFile, proxy: proxy, environment: ProcessInfo.processInfo.environment)
        if let connections { settings.connectionsPerHost = max(1, connections) }
        (settings.caFileName, settings.proxyName) = ("--cacert", "--proxy")
        let transport = try HTTPTransport.make(settings)
        try transport.requireTrust(for: apiURL)
        return ResolveClient(
            baseURL: apiURL, appID: appID, apiKey: try apiKey(), retries: max(0, retries), transport: transport,
            pacer: RequestPacer(rate: rate))
    }
}

/// Options shared by warm, resolve and ready: backend, identity, cache, chain.
struct BackendOptions: ParsableArguments {
    @OptionGroup var cache: CacheDirOption
    @OptionGroup var remote: RemoteOptions
    @Option(help: "A bundled default .fpbundle for Tier 3.") var bundle: String?
    @Option(help: "The SDK environment, which sets the TTL of flows sent without cache_ttl_seconds.")
    var environment: SDKEnvironment = .production
    @Option(parsing: .unconditional, help: "resolveTimeout for each live resolve (e.g. 4s, 500ms).")
    var timeout = DurationArgument("4s", seconds: 4)
    @Option(parsing: .unconditional, help: "Retries on 429 and 5xx, honouring Retry-After.") var retries = 2
    @Flag(name: .customLong("no-batch"), help: "Never use the resolve-batch endpoint.") var noBatch = false

    func validate() throws {
        try timeout.check(
            "--timeout", from: DurationArgument("0s", seconds: 0), above: true,
            to: DurationArgument("1h", seconds: 3600))
        try checkRange("--retries", retries, 0...100)
    }

    func identity() throws -> Identity { try remote.identity() }

    /// `connections` per host (`WarmRun.Options.connections`, for warm; the
    /// transport's default for one resolve) and `mediaConcurrency` downloads.
    func makeWarmer(
        media: MediaStrategy, connections: Int? = nil,
        mediaConcurrency: Int = WarmRun.Options.defaultConcurrency, rate: RequestPacer.Rate? = nil,
        mediaGrace: Duration = .seconds(10)
    ) throws -> Warmer {
        let client = try remote.client(retries: retries, connections: connections, rate: rate)
        let store = try cache.open(create: true)
        let loaded = try bundle.map { try LoadedBundle.open($0) }
        var config = WarmConfiguration()
        config.environment = environment
        config.resolveTimeout = timeout.duration
        config.media = media
        config.batch = !noBatch
        config.mediaConcurrency = mediaConcurrency
        config.mediaGrace = mediaGrace
        config.now = try Now.pinned()
        if environment.defaultTTL == 0 {
            Console.warn(
                "environment \(environment.rawValue) defaults to a 0 s TTL: flows the backend sends without "
                    + "cache_ttl_seconds expire at once (they still serve Tier 2)")
        }
        return Warmer(client: client, store: store, bundle: loaded, config: config)
    }
}
