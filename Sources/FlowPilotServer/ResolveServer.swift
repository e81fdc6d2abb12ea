import FlowPilotCore
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// `fpctl serve`: the resolve API of spec/resolve-api.md over the flows of one
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
    }

    /// The apps served and their placements, for the start-up banner.
    public var summary: [(app: String, placements: [String])] {
        apps.keys.sorted().map { ($0, apps[$0]!.bundle.flows.keys.sorted()) }
    }

    /// Runs until SIGINT or SIGTERM; `onListening` gets the bound URL (useful with port 0).
    public func run(onListening: @escaping @Sendable (String) -> Void) async throws {
        let router = Router()
        if !options.quiet { router.middlewares.add(RequestLog()) }
        router.post("apps/:app/placements/resolve-batch") { request, context in
            try await self.resolveBatch(request, context)
        }
        router.post("apps/:app/placements/:placement/resolve") { request, context in
            try await self.resolveOne(request, context)
        }
        router.get("media/:file") { request, context in self.asset("media", request, context) }
        router.get("fonts/:file") { request, context in self.asset("fonts", request, context) }
        router.get("_admin/stats") { _, _ in try Self.json(self.stats.snapshot()) }
        router.delete("_admin/stats") { _, _ in
            self.stats.reset()
            return Response(status: .noContent)
        }
        router.get("_admin/faults") { _, _ in try Self.json(self.faults.withLock { $0 }) }
        router.post("_admin/faults") { request, context in try await self.setFaults(request, context) }
        router.delete("_admin/faults") { _, _ in
            self.faults.withLock { $0 = self.options.faults }
            return Response(status: .noContent)
        }
        var logger = Logger(label: "fpctl.serve", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = .error
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(options.host, port: options.port)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? self.options.port
                onListening("http://\(self.options.host):\(port)")
            },
            logger: logger)
        try await app.runService()
    }

    // MARK: Resolve

    private struct ResolveBody {
        let user_id: String
        let attributes: [String: JSONValue]?
        let placement_keys: [String]?
    }

    private func resolveOne(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        stats.count(route: "resolve")
        if let denied = authorize(request) { return denied }
        let appID = context.parameters.get("app") ?? ""
        let placement = context.parameters.get("placement") ?? ""
        let body: ResolveBody
        switch await decode(request) {
        case .success(let b): body = b
        case .failure(let failure): return failure.response
        }
        guard let app = apps[appID] else { return Self.error(.notFound, "unknown_app", "no app '\(appID)' is served here") }
        stats.count(app: appID, placement: placement, user: body.user_id)
        let current = faults.withLock { $0 }
        if let faulted = await applyFaults(current, placement: placement) { return faulted }
        guard app.bundle.flows[placement] != nil || app.rules?.placements[placement] != nil else {
            return Self.error(.notFound, "unknown_placement", "no placement '\(placement)' in app '\(appID)'")
        }
        let flowKey = chosenFlow(app, placement: placement, body: body, faults: current)
        if !options.rewriteAssetURLs, current.isEmpty, let cached = app.cachedResponse(placement: placement, flow: flowKey) {
            return Self.jsonResponse(cached)
        }
        let payload = result(app, placement: placement, body: body, faults: current, base: base(request))
        return Self.deliver(payload, faults: current, placement: placement)
    }

    private func resolveBatch(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        stats.count(route: "resolve-batch")
        let current = faults.withLock { $0 }
        if current.batch_disabled == true { return Self.error(.notFound, "not_found", "no such route") }
        if let denied = authorize(request) { return denied }
        let appID = context.parameters.get("app") ?? ""
        let body: ResolveBody
        switch await decode(request) {
        case .success(let b): body = b
        case .failure(let failure): return failure.response
        }
        guard let keys = body.placement_keys, !keys.isEmpty else {
            return Self.error(.badRequest, "invalid_request", "placement_keys must be a non-empty array of strings")
        }
        guard let app = apps[appID] else { return Self.error(.notFound, "unknown_app", "no app '\(appID)' is served here") }
        for key in keys { stats.count(app: appID, placement: key, user: body.user_id) }
        if let faulted = await applyFaults(current, placement: keys.first { current.applies(to: $0) } ?? "") { return faulted }
        var parts: [Data] = []
        let base = base(request)
        for key in keys {
            if app.bundle.flows[key] == nil && app.rules?.placements[key] == nil {
                parts.append(Data("{\"error\":{\"code\":\"unknown_placement\",\"message\":\"no placement in this app\"},\"placement_key\":".utf8)
                    + CanonicalJSON.data(.string(key)) + Data("}".utf8))
            } else {
                parts.append(result(app, placement: key, body: body, faults: current, base: base))
            }
        }
        var payload = Data("{\"results\":[".utf8)
        for (i, part) in parts.enumerated() {
            if i > 0 { payload.append(UInt8(ascii: ",")) }
            payload.append(part)
        }
        payload.append(contentsOf: Array("]}".utf8))
        return Self.deliver(payload, faults: current, placement: keys.first { current.applies(to: $0) } ?? "")
    }

    /// One `{"placement_key", "flow", "cache_ttl_seconds"?}` object, as bytes.
    private func chosenFlow(_ app: ServedApp, placement: String, body: ResolveBody, faults: Faults) -> String? {
        if faults.no_flow?.contains(placement) == true { return nil }
        return app.flowKey(for: placement, userID: body.user_id, attributes: body.attributes ?? [:])
    }

    private func result(_ app: ServedApp, placement: String, body: ResolveBody, faults: Faults, base: String) -> Data {
        let flowKey = chosenFlow(app, placement: placement, body: body, faults: faults)
        var flow = flowKey.flatMap { options.rewriteAssetURLs ? app.rewrittenFlowJSON($0, base: base) : app.flowJSON[$0] }
        if faults.invalid_flow == true && faults.applies(to: placement) && flow != nil {
            flow = Data(#"{"id":"","schema_version":1,"screens":[],"version":"v"}"#.utf8)
        }
        return ServedApp.resultJSON(placement: placement, flow: flow, ttl: options.ttl)
    }

    private func applyFaults(_ faults: Faults, placement: String) async -> Response? {
        guard faults.applies(to: placement) else { return nil }
        let delay = faults.delayMilliseconds()
        if delay > 0 { try? await Task.sleep(for: .milliseconds(delay)) }
        if faults.shouldFail() {
            let status = HTTPResponse.Status(code: faults.fail_status ?? 503)
            var response = Self.error(status, status.code == 429 ? "rate_limited" : "injected_fault", "fault injected by fpctl serve")
            if let after = faults.retry_after { response.headers[.retryAfter] = String(after) }
            return response
        }
        return nil
    }

    private struct ConnectionClosed: Error {}

    /// Sends a JSON payload, damaged the way the current faults ask.
    private static func deliver(_ payload: Data, faults: Faults, placement: String) -> Response {
        guard faults.applies(to: placement) else { return jsonResponse(payload) }
        if faults.close_connection == true {
            let half = ByteBuffer(bytes: payload.prefix(payload.count / 2))
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: payload.count) { writer in
                try await writer.write(half)
                throw ConnectionClosed()
            })
        }
        if faults.invalid_json == true { return jsonResponse(Data("<html>not json</html>".utf8)) }
        if faults.truncate_body == true { return jsonResponse(payload.prefix(payload.count / 2)) }
        return jsonResponse(payload)
    }

    // MARK: Media and admin

    private func asset(_ folder: String, _ request: Request, _ context: BasicRequestContext) -> Response {
        stats.count(route: "media")
        let file = context.parameters.get("file") ?? ""
        if faults.withLock({ $0.fail_media == true }) { return Self.error(.notFound, "not_found", "fault: media disabled") }
        guard let asset = assets["\(folder)/\(file)"] else { return Self.error(.notFound, "not_found", "no such asset") }
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
        faults.withLock { $0 = new }
        return try Self.json(new)
    }

    // MARK: Helpers

    private func authorize(_ request: Request) -> Response? {
        guard let key = options.apiKey else { return nil }
        let given = request.headers[.authorization] ?? ""
        if Self.constantTimeEquals(given, "Bearer \(key)") { return nil }
        return Self.error(.unauthorized, "unauthorized", "missing or invalid API key")
    }

    private func decode(_ request: Request) async -> Result<ResolveBody, ErrorResponse> {
        let bytes: ByteBuffer
        do { bytes = try await request.body.collect(upTo: Self.maxBodyBytes) } catch {
            return .failure(ErrorResponse(Self.error(.contentTooLarge, "too_large", "request body over \(Self.maxBodyBytes) bytes")))
        }
        // fpctl's own parser: a resolve is on the hot path, and JSONDecoder costs more than the rest of it.
        let invalid = ErrorResponse(Self.error(.badRequest, "invalid_request",
                                               "body must be JSON with a string user_id and an attributes object"))
        guard let json = try? JSONValue.parse(Data(bytes.readableBytesView)), let user = json["user_id"]?.stringValue else {
            return .failure(invalid)
        }
        var attributes: [String: JSONValue] = [:]
        switch json["attributes"] {
        case nil, .null?: break
        case .object(let a)?: attributes = a
        default: return .failure(invalid)
        }
        var keys: [String]?
        if let list = json["placement_keys"] {
            guard let items = list.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else { return .failure(invalid) }
            keys = items.compactMap(\.stringValue)
        }
        return .success(ResolveBody(user_id: user, attributes: attributes, placement_keys: keys))
    }

    struct ErrorResponse: Error { let response: Response; init(_ r: Response) { response = r } }

    private func base(_ request: Request) -> String {
        "http://\(request.head.authority ?? "\(options.host):\(options.port)")"
    }

    static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }

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
        let body = JSONValue.object(["error": .object(["code": .string(code), "message": .string(message)])])
        return jsonResponse(CanonicalJSON.data(body), status: status)
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

