import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// What decides how fpctl reaches a backend: the CAs it trusts and the proxy it
/// goes through. `environment` keeps only the variables in `variables`.
public struct TransportSettings: Sendable, Hashable {
    /// A PEM file of CA certificates trusted besides the system's.
    public var caFile: String?
    /// A proxy URL that overrides the proxy variables.
    public var proxy: String?
    /// What messages call `caFile` and `proxy`: where the caller got them
    /// (the command line names its flags, `--cacert` and `--proxy`).
    public var caFileName = "CA file"
    public var proxyName = "proxy"
    /// HTTP/1.1 connections kept per host: the requests that can be in flight
    /// to one host at once (HTTP/2 multiplexes within the server's stream limit).
    public var connectionsPerHost: Int
    /// How long making a connection (name lookup, TCP, TLS's start) may take
    /// before the attempt fails as `unreachable` ("connect timed out").
    public var connectTimeout: Duration = HTTPTransport.defaultConnectTimeout
    public private(set) var environment: [String: String]

    /// The variables read: the trust store's (as OpenSSL and curl read them) and the proxies'.
    public static let variables = ["SSL_CERT_FILE", "SSL_CERT_DIR"] + ProxyRules.variables

    public init(
        caFile: String? = nil, proxy: String? = nil, connectionsPerHost: Int = 8, environment: [String: String] = [:]
    ) {
        self.caFile = caFile
        self.proxy = proxy
        self.connectionsPerHost = max(1, connectionsPerHost)
        self.environment = environment.filter { Self.variables.contains($0.key) && !$0.value.isEmpty }
    }
}

/// HTTP clients for the resolve API and media downloads (docs/https.md). One
/// AsyncHTTPClient per proxy in use (direct, or one proxy), made on first use and
/// kept for the process, like `HTTPClient.shared`; TLS verification is always on.
/// Trusted CAs: `SSL_CERT_FILE` (or the certificates in `SSL_CERT_DIR`) instead of
/// the system's store when set, as curl does, plus `--cacert`'s.
public final class HTTPTransport: Sendable {
    public let proxies: ProxyRules
    let tls: TLSConfiguration
    /// Why the trust store named by `SSL_CERT_FILE`/`SSL_CERT_DIR` cannot be used:
    /// only a request that needs TLS needs it, as in curl.
    let trustProblem: FPError?
    /// HTTP/1.1 connections per host (`TransportSettings.connectionsPerHost`).
    let connectionsPerHost: Int
    /// How a person adds a CA (`TransportSettings.caFileName`): named by every
    /// failure for an untrusted certificate.
    let caFileName: String
    private let clients = Mutex<[ProxyEndpoint?: HTTPClient]>([:])
    /// `TransportSettings.connectTimeout`.
    let connectTimeout: Duration
    public static let defaultConnectTimeout: Duration = .seconds(3)

    /// The connect timeout for a one-shot request of `limit` (`resolve`,
    /// `ready`: `--timeout`): three quarters of it, at most the default, so a
    /// connection still being made when the caller's time is nearly up fails
    /// as "connect timed out" (no request reached the backend) before the
    /// request's own deadline, and one that was made leaves the rest for the answer.
    public static func connectTimeout(within limit: Duration) -> Duration {
        min(defaultConnectTimeout, limit * 3 / 4)
    }

    /// Direct connections, the system's CAs: what a library caller gets by default.
    public static let direct = HTTPTransport(tls: .makeClientConfiguration(), proxies: .none)

    private static let made = Mutex<[TransportSettings: HTTPTransport]>([:])

    /// The transport for `settings`, made once per process. Throws a one-line
    /// `FPError` for a `--cacert` file that is missing or holds no certificate,
    /// and for a proxy URL that is not an http:// URL. A missing `SSL_CERT_FILE`
    /// or `SSL_CERT_DIR` is kept for the first https:// request
    /// (`requireTrust(for:)`): a plain http:// backend does not need it.
    public static func make(_ settings: TransportSettings) throws -> HTTPTransport {
        if let made = made.withLock({ $0[settings] }) { return made }
        let (tls, problem) = try trust(settings)
        let transport = HTTPTransport(
            tls: tls,
            proxies: try ProxyRules(
                override: settings.proxy, overrideName: settings.proxyName, environment: settings.environment),
            trustProblem: problem, connectionsPerHost: settings.connectionsPerHost, caFileName: settings.caFileName,
            connectTimeout: settings.connectTimeout)
        return made.withLock { made in
            if let earlier = made[settings] { return earlier }
            made[settings] = transport
            return transport
        }
    }

    init(
        tls: TLSConfiguration, proxies: ProxyRules, trustProblem: FPError? = nil, connectionsPerHost: Int = 8,
        caFileName: String = TransportSettings().caFileName, connectTimeout: Duration = defaultConnectTimeout
    ) {
        self.caFileName = caFileName
        self.connectTimeout = connectTimeout
        self.tls = tls
        self.proxies = proxies
        self.trustProblem = trustProblem
        self.connectionsPerHost = connectionsPerHost
    }

    /// Throws the one-line error about the trust store the environment names
    /// when `url` needs TLS and that store cannot be read.
    public func requireTrust(for url: String) throws {
        if let trustProblem, Self.needsTLS(url) { throw trustProblem }
    }

    static func needsTLS(_ url: String) -> Bool {
        url.prefix(8).lowercased() == "https://"
    }

    /// The failure a transport error stands for (`ResolveFailure.transport`),
    /// naming the way to trust a private CA when the certificate was not
    /// trusted: the one place that hint is added, for resolves and downloads alike.
    public func failure(_ error: any Error, proxy: ProxyEndpoint?) -> ResolveFailure {
        let failure = ResolveFailure.transport(error, proxy: proxy)
        if case .tls(let message) = failure, failure.isUntrustedCertificate {
            return .tls("\(message) (trust its CA with \(caFileName))")
        }
        return failure
    }

    /// The client for `url`, and the proxy it goes through (nil: direct).
    public func route(_ url: String) -> (client: HTTPClient, proxy: ProxyEndpoint?) {
        let proxy = proxies.proxy(for: url)
        let client = clients.withLock { clients in
            if let client = clients[proxy] { return client }
            let client = HTTPClient(
                eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration(proxy))
            clients[proxy] = client
            return client
        }
        return (client, proxy)
    }

    /// Fails fast on a refused connection instead of retrying until the deadline:
    /// an unreachable backend is an outcome (`unreachable`), not a hang. HTTP/2
    /// where the server offers it by ALPN (one connection, as many streams as
    /// the server allows), else up to `connectionsPerHost` HTTP/1.1 connections.
    private func configuration(_ proxy: ProxyEndpoint?) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.tlsConfiguration = tls
        configuration.httpVersion = .automatic
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connectionsPerHost)
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = .init(
            connect: .nanoseconds(max(1, Int64(connectTimeout / .nanoseconds(1)))), read: .seconds(30))
        // No spans: fpctl bootstraps no tracer, and the default no-op one
        // still cost every request a URL parse for its attributes.
        configuration.tracing.tracer = nil
        if let proxy {
            let authorization = proxy.username.map {
                HTTPClient.Authorization.basic(username: $0, password: proxy.password ?? "")
            }
            configuration.proxy = .server(host: proxy.host, port: proxy.port, authorization: authorization)
        }
        return configuration
    }

    /// The TLS configuration, and why the environment's trust store cannot be used, if it cannot.
    private static func trust(_ settings: TransportSettings) throws -> (TLSConfiguration, FPError?) {
        var tls = TLSConfiguration.makeClientConfiguration()
        var problem: FPError?
        if let file = settings.environment["SSL_CERT_FILE"] {
            // Read by the TLS library when the first connection is made (it may hold
            // hundreds of certificates); a file that holds none fails that connection with `tls`.
            if FileManager.default.isReadableFile(atPath: file) {
                tls.trustRoots = .file(file)
            } else {
                problem = FPError.inputMissing("SSL_CERT_FILE \(file): cannot read the file")
            }
        } else if let directory = settings.environment["SSL_CERT_DIR"] {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue {
                tls.trustRoots = .file(directory)
            } else {
                problem = FPError.inputMissing("SSL_CERT_DIR \(directory): no such directory")
            }
        }
        if let file = settings.caFile {
            tls.additionalTrustRoots = [.certificates(try certificates(file, origin: settings.caFileName))]
        }
        return (tls, problem)
    }

    /// The certificates of a PEM file, or a one-line error naming the file.
    static func certificates(_ path: String, origin: String) throws -> [NIOSSLCertificate] {
        let data: Data
        do { data = try InputFile.contents(path, "CA file", limit: 16 << 20) } catch let error as FPError {
            throw FPError.inputMissing("\(origin) \(error.description)")
        }
        let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(data))
        guard let certificates, !certificates.isEmpty else {
            throw FPError.invalid([.error("ca-file", path, "\(origin): no PEM certificate in the file")])
        }
        return certificates
    }
}
