import FlowPilotCore
import Foundation
import HTTPTypes
import HummingbirdCore
import NIOCore

/// The two resolve routes, parsed from the request path.
enum ResolveRoute: Equatable {
    case single(app: String, placement: String)
    case batch(app: String)

    var counted: ServeStats.Route {
        switch self {
        case .single: .resolve
        case .batch: .resolveBatch
        }
    }

    /// The path of a request target as Hummingbird's router reads it: an
    /// origin-form target up to its `?`; any other form through `URI`.
    static func path(ofTarget target: String) -> Substring {
        guard target.utf8.first == UInt8(ascii: "/") else { return URI(target).path[...] }
        guard let query = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return target[...] }
        return target[..<query]
    }

    /// `/apps/{app}/placements/{key}/resolve` and `/apps/{app}/placements/resolve-batch`,
    /// read as Hummingbird's router reads paths: segments between slashes, empty
    /// ones skipped (so `//` and a trailing slash change nothing), compared
    /// byte for byte, with no percent-decoding. A placement may itself be called
    /// `resolve` or `resolve-batch`.
    init?(path: Substring) {
        guard let parsed = path.withUTF8Bytes(Self.parse) else { return nil }
        self = parsed
    }

    /// One pass over the bytes, noting where each non-empty segment starts and ends.
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> ResolveRoute? {
        // Five segments at most; on the stack (InlineArray would need macOS 26).
        withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: 5) { parse(bytes, segments: $0) }
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>, segments: UnsafeMutableBufferPointer<Range<Int>>)
        -> ResolveRoute?
    {
        let slash = UInt8(ascii: "/")
        var count = 0
        var i = 0
        while i < bytes.count {
            if bytes[i] == slash {
                i += 1
                continue
            }
            let start = i
            while i < bytes.count, bytes[i] != slash { i += 1 }
            guard count < 5 else { return nil }
            segments[count] = start..<i
            count += 1
        }
        guard count == 4 || count == 5 else { return nil }
        func text(_ k: Int) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: bytes[segments[k]]), as: UTF8.self)
        }
        func matches(_ k: Int, _ word: StaticString) -> Bool {
            let s = segments[k]
            guard s.count == word.utf8CodeUnitCount, let base = bytes.baseAddress else { return false }
            return memcmp(base + s.lowerBound, word.utf8Start, s.count) == 0
        }
        guard matches(0, "apps"), matches(2, "placements") else { return nil }
        if count == 4 { return matches(3, "resolve-batch") ? .batch(app: text(1)) : nil }
        return matches(4, "resolve") ? .single(app: text(1), placement: text(3)) : nil
    }
}

/// What a resolve request is answered with: a JSON body and status, plus the
/// parts of the current faults that take time or damage the delivery.
struct ResolveReply {
    var status: HTTPResponse.Status = .ok
    var body: ByteBuffer
    var retryAfter: Int?
    /// Milliseconds to wait before answering (`latency_ms`).
    var delayMilliseconds = 0
    /// Send half the body, then close the connection (`close_connection`).
    var closeMidBody = false
    /// Held until the fault set is replaced (`hold`).
    var held = false

    init(_ status: HTTPResponse.Status = .ok, body: ByteBuffer) {
        self.status = status
        self.body = body
    }

    init<D: DataProtocol>(_ status: HTTPResponse.Status = .ok, json: D) {
        self.init(status, body: ByteBuffer(bytes: json))
    }

    static func error(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> ResolveReply {
        let body = JSONValue.object(["error": .object(["code": .string(code), "message": .string(message)])])
        return ResolveReply(status, json: CanonicalJSON.data(body))
    }
}

extension ResolveServer {
    /// Answers one resolve request without suspending: counts it, checks the key,
    /// parses the body, applies targeting and faults. `ResolveHandler` writes the
    /// reply, after `delayMilliseconds` when a latency fault asks for it.
    ///
    /// - Parameters:
    ///   - authorization: the `Authorization` header, if any.
    ///   - authority: the `Host` the client used, for rewritten asset URLs.
    ///   - body: the request body, or nil when it was over `maxBodyBytes`.
    ///   - faults: the fault set in force when the request arrived.
    func resolve(
        _ route: ResolveRoute, authorization: String?, authority: String?,
        body: ByteBuffer?, faults: Faults
    ) -> ResolveReply {
        stats.count(route: route.counted)
        if case .batch = route, faults.batchDisabled == true { return .error(.notFound, "not_found", "no such route") }
        if let denied = authorize(authorization) { return denied }
        guard let body else {
            return .error(.contentTooLarge, "too_large", "request body over \(Self.maxBodyBytes) bytes")
        }
        guard let request = ResolveBody(body) else {
            return .error(
                .badRequest, "invalid_request", "body must be JSON with a string user_id and an attributes object")
        }
        switch route {
        case .single(let appID, let placement):
            return resolveOne(appID: appID, placement: placement, request, authority: authority, faults: faults)
        case .batch(let appID):
            return resolveBatch(appID: appID, request, authority: authority, faults: faults)
        }
    }

    private func resolveOne(
        appID: String, placement: String, _ request: ResolveBody, authority: String?,
        faults: Faults
    ) -> ResolveReply {
        guard let app = apps[appID] else { return .error(.notFound, "unknown_app", "no app '\(appID)' is served here") }
        stats.count(app: appID, placement: placement, user: request.userID)
        if let failed = injectedFailure(faults, placement: placement) { return failed }
        guard app.bundle.flows[placement] != nil || app.rules?.placements[placement] != nil else {
            return faults.shaping(
                .error(.notFound, "unknown_placement", "no placement '\(placement)' in app '\(appID)'"),
                placement: placement)
        }
        let flowKey = chosenFlow(app, placement: placement, request, faults: faults)
        if faults.isEmpty {
            // No fault can touch it: the common case, pre-encoded (once per base URL when rewriting).
            let cached =
                options.rewriteAssetURLs
                ? app.cachedResponse(placement: placement, flow: flowKey, base: baseURL(authority))
                : app.cachedResponse(placement: placement, flow: flowKey)
            if let cached { return ResolveReply(body: cached) }
        }
        let payload = result(app, placement: placement, request, faults: faults, authority: authority)
        return faults.shaping(Self.damaged(payload, faults: faults, placement: placement), placement: placement)
    }

    private func resolveBatch(appID: String, _ request: ResolveBody, authority: String?, faults: Faults) -> ResolveReply
    {
        guard let keys = request.placementKeys, !keys.isEmpty else {
            return .error(.badRequest, "invalid_request", "placement_keys must be a non-empty array of strings")
        }
        guard let app = apps[appID] else { return .error(.notFound, "unknown_app", "no app '\(appID)' is served here") }
        for key in keys { stats.count(app: appID, placement: key, user: request.userID) }
        let faulted = keys.first { faults.applies(to: $0) } ?? ""
        if let failed = injectedFailure(faults, placement: faulted) { return failed }
        var payload = Data("{\"results\":[".utf8)
        for (i, key) in keys.enumerated() {
            if i > 0 { payload.append(UInt8(ascii: ",")) }
            if app.bundle.flows[key] == nil && app.rules?.placements[key] == nil {
                payload.append(
                    contentsOf: Array(
                        "{\"error\":{\"code\":\"unknown_placement\",\"message\":\"no placement in this app\"},\"placement_key\":"
                            .utf8))
                payload.append(CanonicalJSON.data(.string(key)))
                payload.append(UInt8(ascii: "}"))
            } else {
                payload.append(result(app, placement: key, request, faults: faults, authority: authority))
            }
        }
        payload.append(contentsOf: Array("]}".utf8))
        return faults.shaping(Self.damaged(payload, faults: faults, placement: faulted), placement: faulted)
    }

    private func chosenFlow(_ app: ServedApp, placement: String, _ request: ResolveBody, faults: Faults) -> String? {
        if faults.noFlow?.contains(placement) == true { return nil }
        return app.flowKey(for: placement, userID: request.userID, attributes: request.attributes)
    }

    /// One `{"cache_ttl_seconds"?, "flow", "placement_key"}` object, as bytes.
    private func result(
        _ app: ServedApp, placement: String, _ request: ResolveBody, faults: Faults,
        authority: String?
    ) -> Data {
        let flowKey = chosenFlow(app, placement: placement, request, faults: faults)
        var flow = flowKey.flatMap {
            options.rewriteAssetURLs ? app.rewrittenFlowJSON($0, base: baseURL(authority)) : app.flowJSON[$0]
        }
        if faults.invalidFlow == true && faults.applies(to: placement) && flow != nil {
            flow = Data(#"{"id":"","schema_version":1,"screens":[],"version":"v"}"#.utf8)
        }
        return ServedApp.resultJSON(placement: placement, flow: flow, ttl: options.ttl)
    }

    /// Where the client reached this server, for rewritten asset URLs.
    private func baseURL(_ authority: String?) -> String {
        "http://\(authority ?? "\(Self.urlHost(options.host)):\(options.port)")"
    }

    /// The `fail_rate` fault: that fraction of requests fail with `fail_status`.
    private func injectedFailure(_ faults: Faults, placement: String) -> ResolveReply? {
        guard faults.applies(to: placement), faults.shouldFail() else { return nil }
        let status = HTTPResponse.Status(code: faults.failStatus ?? 503)
        var reply = ResolveReply.error(
            status, status.code == 429 ? "rate_limited" : "injected_fault",
            "fault injected by fpctl serve")
        reply.retryAfter = faults.retryAfter
        reply.delayMilliseconds = faults.delayMilliseconds()
        reply.held = faults.hold == true
        return reply
    }

    /// A payload, damaged the way the body faults ask.
    private static func damaged(_ payload: Data, faults: Faults, placement: String) -> ResolveReply {
        guard faults.applies(to: placement) else { return ResolveReply(json: payload) }
        if faults.invalidJSON == true { return ResolveReply(json: Data("<html>not json</html>".utf8)) }
        if faults.truncateBody == true { return ResolveReply(json: payload.prefix(payload.count / 2)) }
        return ResolveReply(json: payload)
    }

    private func authorize(_ authorization: String?) -> ResolveReply? {
        guard let expected = expectedAuthorization else { return nil }
        if Self.constantTimeEquals(authorization ?? "", expected) { return nil }
        return .error(.unauthorized, "unauthorized", "missing or invalid API key")
    }

    /// Whether the header's bytes are `expected`'s, in time that depends on their
    /// lengths only, not on where they first differ.
    static func constantTimeEquals(_ header: String, _ expected: [UInt8]) -> Bool {
        func compare(_ x: UnsafeBufferPointer<UInt8>) -> Bool {
            expected.withUnsafeBufferPointer { y in
                var diff = UInt8(x.count == y.count ? 0 : 1)
                for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
                return diff == 0
            }
        }
        return header.withUTF8Bytes(compare)
    }
}

extension Faults {
    /// Adds the delivery faults (latency, connection closed mid-body) to a reply.
    fileprivate func shaping(_ reply: ResolveReply, placement: String) -> ResolveReply {
        guard applies(to: placement) else { return reply }
        var reply = reply
        reply.delayMilliseconds = delayMilliseconds()
        reply.held = hold == true
        reply.closeMidBody = closeConnection == true && reply.status == .ok
        return reply
    }
}

/// A resolve request body: `user_id`, optional `attributes`, and for a batch
/// `placement_keys`.
struct ResolveBody {
    let userID: String
    let attributes: [ExactName: JSONValue]
    let placementKeys: [String]?

    /// fpctl's own parser: a resolve is on the hot path, and JSONDecoder costs
    /// more than the rest of it. The top level is read as a list of members: a
    /// dictionary of three keys cost more than looking them up.
    init?(_ bytes: ByteBuffer) {
        guard let members = bytes.withUnsafeReadableBytes({ try? JSONValue.parseMembers(bytes: $0) }) else {
            return nil
        }
        var user: String?
        var attributes: [ExactName: JSONValue] = [:]
        var placementKeys: [String]?
        for (key, value) in members {
            switch key {
            case "user_id":
                guard case .string(let id) = value else { return nil }
                user = id
            case "attributes":
                switch value {
                case .null: attributes = [:]
                case .object(let a): attributes = a
                default: return nil
                }
            case "placement_keys":
                guard let items = value.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else { return nil }
                placementKeys = items.compactMap(\.stringValue)
            default:
                continue
            }
        }
        guard let user else { return nil }
        self.userID = user
        self.attributes = attributes
        self.placementKeys = placementKeys
    }
}

extension StringProtocol {
    /// The text's UTF-8 bytes in one buffer: its own storage when contiguous
    /// (native strings and their slices), a copy otherwise.
    func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        return try Array(utf8).withUnsafeBufferPointer(body)
    }
}
