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
        var attrs: [ExactName: JSONValue] = [:]
        for pair in attributes {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw FPError.usage("--attribute \(pair): use key=value")
            }
            let key = String(pair[..<eq])
            let raw = String(pair[pair.index(after: eq)...])
            attrs[ExactName(key)] = Self.typed(raw)
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

    /// The backend as the core takes it (`ResolveBackend`): the URL checked,
    /// the key read, the transport's settings named by their flags.
    /// `connectTimeout`: a one-shot command's (`HTTPTransport.connectTimeout(within:)`); nil, the default.
    func backend(retries: Int = 2, rate: RequestPacer.Rate? = nil, connectTimeout: Duration? = nil) throws
        -> ResolveBackend
    {
        guard URL(string: apiURL)?.scheme?.hasPrefix("http") == true else {
            throw FPError.usage("--api-url \(apiURL): use an http(s) URL")
        }
        var settings = TransportSettings(caFile: caFile, proxy: proxy, environment: ProcessInfo.processInfo.environment)
        (settings.caFileName, settings.proxyName) = ("--cacert", "--proxy")
        if let connectTimeout { settings.connectTimeout = connectTimeout }
        return ResolveBackend(
            baseURL: apiURL, appID: appID, apiKey: try apiKey(), retries: retries, transport: settings, rate: rate)
    }

    /// A client with the transport's default connections (one resolve, a bundle pull).
    func client(retries: Int = 2) throws -> ResolveClient { try backend(retries: retries).client() }
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
    @Option(
        parsing: .unconditional,
        help: "Retries on 429, 5xx and connection errors (refused, reset, timed out), honouring Retry-After.")
    var retries = 2
    @Flag(name: .customLong("no-batch"), help: "Never use the resolve-batch endpoint.") var noBatch = false

    func validate() throws {
        try timeout.check(
            "--timeout", from: DurationArgument("0s", seconds: 0), above: true,
            to: DurationArgument("1h", seconds: 3600))
        try checkRange("--retries", retries, 0...100)
    }

    func identity() throws -> Identity { try remote.identity() }

    /// A warmer for one resolve (`resolve`, `ready`): the transport's default connections.
    /// `oneShot` (resolve, ready): each request ends within `--timeout`, so a
    /// connect still pending then is "no request reached the backend" (69).
    func makeWarmer(media: MediaStrategy, oneShot: Bool = false) throws -> Warmer {
        let limit = timeout.duration
        var client = try remote.backend(
            retries: retries, connectTimeout: oneShot ? HTTPTransport.connectTimeout(within: limit) : nil
        ).client()
        if oneShot { client.requestLimit = limit }
        return Warmer(
            client: client, store: try cache.open(create: true), bundle: try loadBundle(),
            config: try configuration(media: media))
    }

    /// The bundle for Tier 3, opened.
    func loadBundle() throws -> LoadedBundle? { try bundle.map { try LoadedBundle.open($0) } }

    /// The chain's settings from these options; warns once of an environment whose default TTL is 0.
    /// The run's configuration but its limits (a warm's `WarmLimits.configure` sets those).
    func configuration(media: MediaStrategy) throws -> WarmConfiguration {
        var config = WarmConfiguration()
        config.environment = environment
        config.resolveTimeout = timeout.duration
        config.media = media
        config.batch = !noBatch
        config.now = try Now.pinned()
        if environment.defaultTTL == 0 {
            Console.warn(
                "environment \(environment.rawValue) defaults to a 0 s TTL: flows the backend sends without "
                    + "cache_ttl_seconds expire at once (they still serve Tier 2)")
        }
        return config
    }
}
