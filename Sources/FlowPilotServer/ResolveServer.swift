import FlowPilotCore
import FlowPilotOutput
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// `fpctl serve`: the resolve API (docs/serve.md) over the flows of one
/// or more bundles, with targeting, fault injection and request counting for
/// the clients under test (docs/serve.md).
public final class ResolveServer: Sendable {
    public struct Options: Sendable {
        public var host = "127.0.0.1"
        public var port = 8080
        /// `cache_ttl_seconds` to send; omitted when nil.
        public var ttl: Int?
        /// Bearer token required on resolve routes; open when nil.
        public var apiKey: String?
        public var rewriteAssetURLs = false
        /// No request log on standard error.
        public var quiet = false
        public var faults = Faults()
        public init() {}
    }

    static let maxBodyBytes = 64 * 1024

    let apps: [String: ServedApp]
    let assets: [String: LoadedBundle.Asset]
    let options: Options
    let stats = ServeStats()
    let faults: Mutex<Faults>
    /// What lets each answer a `hold` fault holds go, run once the fault set
    /// is replaced; and how many times holds were let go (`hold(since:_:)`).
    private let holds = Mutex<(generation: Int, releases: [@Sendable () -> Void])>((0, []))
    /// `Bearer KEY` as bytes, what a resolve's Authorization header must be; nil when open.
    let expectedAuthorization: [UInt8]?

    /// Loads every source; bad content throws the same findings `bundle validate`
    /// reports (`FPError.invalid`), so the server refuses to start.
    public init(sources: [String], options: Options) throws {
        if let problem = options.faults.validationError() { throw FPError.usage(problem) }
        var apps: [String: ServedApp] = [:]
        var assets: [String: LoadedBundle.Asset] = [:]
        for source in sources {
            let app = try ServedApp.load(source, ttl: options.ttl)
            if apps[app.bundle.appID] != nil {
                throw FPError.usage("\(source): app '\(app.bundle.appID)' is already served from another source")
            }
            apps[app.bundle.appID] = app
            assets.merge(app.bundle.assetsByPath) { a, _ in a }
        }
        self.apps = apps
        self.assets = assets
        self.options = options
        faults = Mutex(options.faults)
        expectedAuthorization = options.apiKey.map { Array("Bearer \($0)".utf8) }
    }

    /// The apps served and their placements, for the start-up banner.
    public var summary: [(app: String, placements: [String])] {
        apps.sorted { $0.key < $1.key }.map { ($0.key, $0.value.bundle.flows.keys.sorted()) }
    }

    /// Runs until SIGINT or SIGTERM; `onListening` gets the bound URL (useful with port 0).
    public func run(onListening: @escaping @Sendable (String) -> Void) async throws {
        let router = Router()
        let requestLog = options.quiet ? nil : RequestLogWriter()
        defer { requestLog?.close() }  // the last lines, at shutdown
        if let requestLog { router.middlewares.add(RequestLog(writer: requestLog)) }
        router.get("media/:file") { request, context in self.asset("media", request, context) }
        router.get("fonts/:file") { request, context in self.asset("fonts", request, context) }
        router.get("_admin/stats") { _, _ in try Self.json(self.stats.snapshot()) }
        router.delete("_admin/stats") { _, _ in
            self.stats.reset()
            return Response(status: .noContent)
        }
        router.get("_admin/faults") { _, _ in try Self.json(self.currentFaults) }
        router.post("_admin/faults") { request, context in try await self.setFaults(request, context) }
        router.delete("_admin/faults") { _, _ in
            self.replaceFaults(self.options.faults)
            return Response(status: .noContent)
        }
        var logger = Logger(label: "fpctl.serve", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = .error
        let app = Application(
            router: router,
            // Resolves are answered on the event loop (ResolveHandler); the rest
            // goes through the router.
            server: HTTPServerBuilder { responder in
                ResolveHTTP1Channel(http1: HTTP1Channel(responder: responder), server: self, log: requestLog)
            },
            configuration: .init(address: .hostname(options.host, port: options.port)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? self.options.port
                onListening("http://\(Self.urlHost(self.options.host)):\(port)")
            },
            logger: logger)
        try await app.runService()
    }

    /// A host as it stands in a URL: an IPv6 address in brackets (`[::1]`).
    static func urlHost(_ host: String) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    }

    /// The fault set in force now.
    var currentFaults: Faults { faults.withLock { $0 } }

    // MARK: Media and admin

    private func asset(_ folder: String, _ request: Request, _ context: BasicRequestContext) -> Response {
        stats.count(route: .media)
        let file = context.parameters.get("file") ?? ""
        if faults.withLock({ $0.failMedia == true }) {
            return Self.error(.notFound, "not_found", "fault: media disabled")
        }
        guard let asset = assets["\(folder)/\(file)"] else {
            return Self.error(.notFound, "not_found", "no such asset")
        }
        var headers = HTTPFields()
        let etag = "\"\(asset.sha256)\""
        headers[.eTag] = etag
        headers[.cacheControl] = "public, max-age=31536000, immutable"
        if request.headers[.ifNoneMatch] == etag { return Response(status: .notModified, headers: headers) }
        headers[.contentType] = Self.contentType(file)
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: asset.data)))
    }

    private func setFaults(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let bytes: ByteBuffer
        do { bytes = try await request.body.collect(upTo: Self.maxBodyBytes) } catch {
            return Self.error(.contentTooLarge, "too_large", "body over \(Self.maxBodyBytes) bytes")
        }
        guard let new = try? JSONDecoder().decode(Faults.self, from: Data(buffer: bytes)) else {
            return Self.error(.badRequest, "invalid_request", "body must be a faults object (docs/serve.md)")
        }
        if let problem = new.validationError() { return Self.error(.badRequest, "invalid_request", problem) }
        replaceFaults(new)
        return try Self.json(new)
    }

    /// The fault set replaced, and every answer a `hold` held let go.
    private func replaceFaults(_ new: Faults) {
        faults.withLock { $0 = new }
        releaseHolds()
    }

    /// Every answer a `hold` holds let go, each on its connection's event loop
    /// (the fault set replaced, or a graceful stop, which waits for owed answers).
    func releaseHolds() {
        let releases = holds.withLock { holds in
            defer { (holds.generation, holds.releases) = (holds.generation + 1, []) }
            return holds.releases
        }
        for release in releases { release() }
    }

    /// How many times holds were let go so far: read before the fault set a
    /// held answer was drawn from.
    var holdGeneration: Int { holds.withLock { $0.generation } }

    /// Keeps `release` for the next time holds are let go, or runs it now if
    /// they were let go since `generation` (the faults replaced, or a stop,
    /// while the answer was being held): no hold outlives the set it came from.
    func hold(since generation: Int, _ release: @escaping @Sendable () -> Void) {
        let now = holds.withLock { holds -> Bool in
            guard holds.generation == generation else { return true }
            holds.releases.append(release)
            return false
        }
        if now { release() }
    }

    // MARK: Helpers

    static func jsonResponse<D: DataProtocol>(_ data: D, status: HTTPResponse.Status = .ok) -> Response {
        jsonResponse(ByteBuffer(bytes: data), status: status)
    }

    static func jsonResponse(_ buffer: ByteBuffer, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: buffer))
    }

    static func json<T: Encodable>(_ value: T) throws -> Response {
        jsonResponse(Data(try JSONOutput.string(value).utf8))
    }

    static func error(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
        let reply = ResolveReply.error(status, code, message)
        return jsonResponse(reply.body, status: reply.status)
    }

    static func contentType(_ file: String) -> String {
        switch BundlePath.normalizedExtension(file) {
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "gif": "image/gif"
        case "webp": "image/webp"
        case "ttf": "font/ttf"
        case "otf": "font/otf"
        case "woff": "font/woff"
        case "woff2": "font/woff2"
        case "json": "application/json"
        default: "application/octet-stream"
        }
    }
}

extension ResolveServer {
    /// Whether an error of `run` says the host is not an address at all (not
    /// an IP address, and no name that resolves): the option is wrong, where
    /// an address that cannot be bound (taken, not this machine's) is not.
    public static func isUnknownHost(_ error: any Error) -> Bool {
        error is SocketAddressError || error is SocketAddressError.UnknownHost
    }
}
