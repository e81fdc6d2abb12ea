import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// What one live resolve of one placement gave.
public enum LiveResult: Sendable {
    case flow(FlowDocument, ttlSeconds: Int?)
    case noFlow
    case failed(code: String, message: String)
}

/// The resolve API of spec/resolve-api.md over AsyncHTTPClient: per-placement and
/// batch resolves, retries with backoff on 429 and 5xx honouring `Retry-After`.
/// The API key goes only into the Authorization header; it is never logged,
/// cached or put in an error message.
public struct ResolveClient: Sendable {
    public let baseURL: String
    public let appID: String
    let apiKey: String?
    public let retries: Int
    let client: HTTPClient
    /// Per-attempt cap; the caller's resolveTimeout is applied above this.
    let attemptTimeout: TimeAmount = .seconds(30)

    /// One client for the process (never shut down, like `HTTPClient.shared`), set
    /// to fail fast on a refused connection instead of retrying until the deadline:
    /// an unreachable backend is an outcome (`unreachable`), not a hang.
    public static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = .init(connect: .seconds(3), read: .seconds(30))
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    public init(baseURL: String, appID: String, apiKey: String?, retries: Int = 2, client: HTTPClient = ResolveClient.sharedClient) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.appID = appID
        self.apiKey = apiKey
        self.retries = retries
        self.client = client
    }

    struct BatchUnavailable: Error {}

    private func encode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? s
    }

    private func body(_ identity: Identity, keys: [String]? = nil) -> ByteBuffer {
        var o: [String: JSONValue] = ["user_id": .string(identity.userID), "attributes": .object(identity.attributes)]
        if let keys { o["placement_keys"] = .array(keys.map(JSONValue.string)) }
        return ByteBuffer(bytes: CanonicalJSON.data(.object(o)))
    }

    public func resolve(_ placement: String, _ identity: Identity) async -> LiveResult {
        let url = "\(baseURL)/apps/\(encode(appID))/placements/\(encode(placement))/resolve"
        switch await post(url, body(identity)) {
        case .failure(let code, let message): return .failed(code: code, message: message)
        case .response(let status, let json):
            if status == 404 {
                let code = json?["error"]?["code"]?.stringValue
                return code == "unknown_placement" ? .noFlow : .failed(code: code ?? "http_404", message: "backend answered 404")
            }
            guard (200..<300).contains(status) else { return .failed(code: "http_\(status)", message: "backend answered \(status)") }
            guard let json else { return .failed(code: "invalid_response", message: "response is not valid JSON") }
            return Self.result(json, placement: placement)
        }
    }

    /// One request for several placements; throws `BatchUnavailable` on 404/405/501.
    func resolveBatch(_ placements: [String], _ identity: Identity) async throws -> [String: LiveResult] {
        let url = "\(baseURL)/apps/\(encode(appID))/placements/resolve-batch"
        func failAll(_ code: String, _ message: String) -> [String: LiveResult] {
            Dictionary(uniqueKeysWithValues: placements.map { ($0, LiveResult.failed(code: code, message: message)) })
        }
        switch await post(url, body(identity, keys: placements)) {
        case .failure(let code, let message):
            return failAll(code, message)
        case .response(let status, let json):
            if [404, 405, 501].contains(status) { throw BatchUnavailable() }
            guard (200..<300).contains(status) else { return failAll("http_\(status)", "backend answered \(status)") }
            guard let results = json?["results"]?.arrayValue else {
                return failAll("invalid_response", "batch response is not valid JSON")
            }
            var out: [String: LiveResult] = [:]
            for r in results {
                guard let key = r["placement_key"]?.stringValue, placements.contains(key) else { continue }
                if let error = r["error"] {
                    let code = error["code"]?.stringValue ?? "error"
                    out[key] = code == "unknown_placement" ? .noFlow : .failed(code: code, message: error["message"]?.stringValue ?? "")
                } else {
                    out[key] = Self.result(r, placement: key)
                }
            }
            for key in placements where out[key] == nil {
                out[key] = .failed(code: "missing_result", message: "the batch response has no result for \(key)")
            }
            return out
        }
    }

    static func result(_ json: JSONValue, placement: String) -> LiveResult {
        let ttl = json["cache_ttl_seconds"]?.numberValue.map { Int($0) }
        switch json["flow"] {
        case nil: return .failed(code: "invalid_response", message: "response has no flow field")
        case .null?: return .noFlow
        case let flow?:
            let (doc, findings) = FlowDocument.validate(flow, location: placement)
            guard let doc else {
                return .failed(code: "invalid_response", message: "flow fails validation: \(findings.first { $0.severity == .error }?.line ?? "")")
            }
            return .flow(doc, ttlSeconds: ttl)
        }
    }

    enum Response {
        case response(status: Int, json: JSONValue?)
        case failure(code: String, message: String)
    }

    /// POST with retries on 429/5xx/connection errors: backoff 200 ms, 400 ms, … or Retry-After (capped at 10 s).
    private func post(_ url: String, _ body: ByteBuffer) async -> Response {
        var attempt = 0
        while true {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "fpctl/\(FPVersion.current)")
            if let apiKey { request.headers.add(name: "Authorization", value: "Bearer \(apiKey)") }
            request.body = .bytes(body)
            var retryAfter: Double?
            var outcome: Response
            do {
                let response = try await client.execute(request, timeout: attemptTimeout)
                let status = Int(response.status.code)
                retryAfter = response.headers.first(name: "Retry-After").flatMap(Double.init)
                let bytes = try await response.body.collect(upTo: 16 << 20)
                let json = try? JSONValue.parse(Data(bytes.readableBytesView))
                if status == 401 || status == 403 {
                    return .failure(code: "unauthorized", message: "backend answered \(status): check the API key")
                }
                outcome = .response(status: status, json: json)
                if status != 429 && status < 500 { return outcome }
            } catch {
                outcome = .failure(code: Self.code(for: error), message: Self.describe(error))
            }
            if attempt >= retries || Task.isCancelled { return outcome }
            attempt += 1
            let delay = min(10, retryAfter ?? 0.2 * pow(2, Double(attempt - 1)))
            try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
        }
    }

    static func code(for error: any Error) -> String {
        let text = "\(error)"
        if text.contains("connect") || text.contains("Connect") || text.contains("refused") { return "unreachable" }
        if text.contains("deadline") || text.contains("timeout") || text.contains("Timeout") { return "timeout" }
        return "connection_error"
    }

    static func describe(_ error: any Error) -> String {
        "\(error)".replacingOccurrences(of: "\n", with: " ")
    }
}
