import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// What one live resolve of one placement gave.
public enum LiveResult: Sendable {
    case flow(FlowDocument, ttlSeconds: Int?)
    case noFlow
    case failed(ResolveFailure)
    /// The backend answered with a flow that the cache could not keep (a
    /// read-only or full disk): `fpctl resolve` and `ready` still serve it
    /// (Tier 1), `warm`, whose work is the cache, fails it (`cache-write`).
    case unstored(FlowDocument, ttlSeconds: Int, reason: String)

    /// Why it failed; nil when the backend answered with a flow or without one.
    public var failure: ResolveFailure? {
        if case .failed(let failure) = self { return failure }
        return nil
    }
}

/// The resolve API (docs/serve.md serves it) over AsyncHTTPClient: per-placement and
/// batch resolves, retries with backoff on 429 and 5xx honouring `Retry-After`.
/// The API key goes only into the Authorization header; it is never logged,
/// cached or put in an error message.
public struct ResolveClient: Sendable {
    public let baseURL: String
    public let appID: String
    let apiKey: String?
    public let retries: Int
    /// Which client, CAs and proxy each URL goes through (docs/https.md).
    public let transport: HTTPTransport
    /// Every request this client makes, counted by endpoint and status.
    public let requests: RequestCounts
    /// Paces every request (retries and media included) and spreads a
    /// `Retry-After` to all of them.
    public let pacer: RequestPacer
    /// Flows validated so far, shared by this client's copies.
    let flows = FlowMemo()
    /// Per-attempt cap; the caller's resolveTimeout is applied above this.
    let attemptTimeout: TimeAmount = .seconds(30)
    /// A one-shot caller's time (`resolve`, `ready`: their `--timeout`): each
    /// request, its attempts and body included, ends within it from its start,
    /// with no retry after. So when the time passes the transport itself says
    /// whether a connection was ever made: a request still connecting (DNS or
    /// TCP pending) fails as `unreachable` ("connect timed out": no request
    /// reached the backend, exit 69), one that was sent as a `timeout`. nil
    /// (warm): attempts run on past a caller's deadline, as late resolves.
    public var requestLimit: Duration?

    /// `…/apps/APP/placements/`, the app's id percent-encoded once.
    private let placementsURL: String

    public init(
        baseURL: String, appID: String, apiKey: String?, retries: Int = 2,
        transport: HTTPTransport = .direct, requests: RequestCounts = RequestCounts(),
        pacer: RequestPacer = RequestPacer()
    ) {
        self.requests = requests
        self.pacer = pacer
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        placementsURL = "\(self.baseURL)/apps/\(Self.encode(appID))/placements/"
        self.appID = appID
        self.apiKey = apiKey
        self.retries = retries
        self.transport = transport
    }

    struct BatchUnavailable: Error {}

    private static func encode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/")))
            ?? s
    }

    /// `{"attributes":…,"placement_keys":[…],"user_id":…}` in canonical JSON, written in key order.
    func body(_ identity: Identity, keys: [String]? = nil) -> ByteBuffer {
        var body = CanonicalJSON.SortedObject(capacity: 256)
        if identity.attributes.isEmpty {
            body.raw("attributes", "{}".utf8)
        } else {
            body.raw("attributes", CanonicalJSON.data(.object(identity.attributes)))
        }
        if let keys { body.strings("placement_keys", keys) }
        body.string("user_id", identity.userID)
        return ByteBuffer(bytes: body.finishBytes())
    }

    public func resolve(_ placement: String, _ identity: Identity) async -> LiveResult {
        await resolve(placement, identity, attempts: nil)
    }

    /// `resolve`, each attempt recorded in `attempts`.
    func resolve(_ placement: String, _ identity: Identity, attempts: AttemptLog?) async -> LiveResult {
        let url = "\(placementsURL)\(Self.encode(placement))/resolve"
        switch await post(url, body(identity), endpoint: "resolve", attempts: attempts) {
        case .failure(let failure): return .failed(failure)
        case .response(let status, let bytes):
            let answer = bytes.flatMap { Answer(read: $0, nested: nil, known: flows) }
            if status == 404 {
                // unknown_placement is "nothing to show here"; unknown_app is a failure.
                switch answer?.object.members["error"]?["code"]?.stringValue {
                case "unknown_placement": return .noFlow
                case let code?: return .failed(.backend(code: Printable.code(code), message: "backend answered 404"))
                case nil: return .failed(.http(status: 404))
                }
            }
            guard (200..<300).contains(status) else { return .failed(.http(status: status)) }
            guard let answer else { return .failed(.invalidResponse("response is not valid JSON")) }
            return result(answer.object, in: answer.bytes, placement: placement)
        }
    }

    /// One request for several placements, their results in the same order;
    /// throws `BatchUnavailable` on 404/405/501.
    func resolveBatch(_ placements: [String], _ identity: Identity, attempts: AttemptLog? = nil) async throws
        -> [LiveResult]
    {
        let url = placementsURL + "resolve-batch"
        func failAll(_ failure: ResolveFailure) -> [LiveResult] {
            Array(repeating: .failed(failure), count: placements.count)
        }
        switch await post(url, body(identity, keys: placements), endpoint: "resolve-batch", attempts: attempts) {
        case .failure(let failure):
            return failAll(failure)
        case .response(let status, let bytes):
            if [404, 405, 501].contains(status) { throw BatchUnavailable() }
            guard (200..<300).contains(status) else { return failAll(.http(status: status)) }
            guard let answer = bytes.flatMap({ Answer(read: $0, nested: "results", known: flows) }),
                let results = answer.object.items
            else {
                return failAll(.invalidResponse("batch response is not valid JSON"))
            }
            // By position, not by a table of names: a batch asks for a few placements.
            var out = [LiveResult?](repeating: nil, count: placements.count)
            for r in results {
                guard let key = r.members["placement_key"]?.stringValue, let index = placements.firstIndex(of: key)
                else { continue }
                if let error = r.members["error"] {
                    let code = error["code"]?.stringValue ?? "error"
                    let message = error["message"]?.stringValue ?? ""
                    out[index] =
                        code == "unknown_placement"
                        ? .noFlow : .failed(.backend(code: Printable.code(code), message: message))
                } else {
                    out[index] = result(r, in: answer.bytes, placement: key)
                }
            }
            return zip(placements, out).map { placement, result in
                result ?? .failed(.missingResult(placement: placement))
            }
        }
    }

    /// An answer read in one pass: every member parsed but each `flow`, whose
    /// bytes are kept for `FlowMemo` (`JSONParser.parseKeepingRaw`).
    struct Answer {
        let bytes: ByteBuffer
        let object: JSONObjectRaw

        /// nil when the bytes are not one JSON object. A flow `known` holds
        /// is not passed over byte by byte (`FlowMemo.prefix(of:)`).
        init?(read bytes: ByteBuffer, nested: String?, known: FlowMemo) {
            guard
                let object = try? bytes.withUnsafeReadableBytes({
                    try JSONParser.parseKeepingRaw(bytes: $0, member: "flow", nested: nested, known: known)
                })
            else { return nil }
            (self.bytes, self.object) = (bytes, object)
        }
    }

    /// One placement's answer: its flow (validated, or the one validated
    /// before whose bytes these are) and TTL.
    func result(_ answer: JSONObjectRaw, in bytes: ByteBuffer, placement: String) -> LiveResult {
        let ttl: Int?
        switch TTL.read(answer.members["cache_ttl_seconds"], field: "cache_ttl_seconds") {
        case .success(let seconds): ttl = seconds
        case .failure(let problem): return .failed(.invalidResponse(problem.message))
        }
        guard let range = answer.raw else { return .failed(.invalidResponse("response has no flow field")) }
        let (doc, findings) = bytes.withUnsafeReadableBytes { raw -> (FlowDocument?, [Finding]) in
            let flow = UnsafeRawBufferPointer(rebasing: raw[range])
            if flow.elementsEqual("null".utf8) { return (nil, []) }
            return flows.validate(bytes: flow, location: placement)
        }
        guard let doc else {
            // `null`: the backend has no flow here.
            if findings.isEmpty { return .noFlow }
            if findings.contains(where: { $0.rule == "flow-json" }) {
                return .failed(.invalidResponse("response is not valid JSON"))
            }
            let first = findings.first { $0.severity == .error }?.line ?? ""
            return .failed(.invalidResponse("flow fails validation: \(first)"))
        }
        return .flow(doc, ttlSeconds: ttl)
    }

    enum Response {
        case response(status: Int, body: ByteBuffer?)
        case failure(ResolveFailure)
    }

    /// POST with retries on 429/5xx/connection errors: backoff 200 ms, 400 ms, …,
    /// or the answer's Retry-After (seconds or an HTTP-date, capped at 10 s; `RetryAfter`), which holds back every
    /// request of the run (`RequestPacer.pause`), not only this one.
    private func post(_ url: String, _ body: ByteBuffer, endpoint: String, attempts: AttemptLog?) async -> Response {
        // The trust store the environment names cannot be read: nothing is sent with another.
        if let problem = transport.trustProblem, HTTPTransport.needsTLS(url) {
            return .failure(.tls(problem.description))
        }
        var attempt = 0
        let end = requestLimit.map { ContinuousClock.now + $0 }
        while true {
            await pacer.admit()
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "fpctl/\(FPVersion.current)")
            if let apiKey { request.headers.add(name: "Authorization", value: "Bearer \(apiKey)") }
            request.body = .bytes(body)
            var retryAfter: Double?
            var paused = false
            var outcome: Response
            let (client, proxy) = transport.route(url)
            do {
                let started = ContinuousClock.now
                var timeout = attemptTimeout
                if let end {
                    let left = started.duration(to: end)
                    timeout = min(timeout, .nanoseconds(max(0, Int64(left / .nanoseconds(1)))))
                }
                let response = try await client.execute(request, timeout: timeout)
                let status = Int(response.status.code)
                requests.record(endpoint, status: status)
                retryAfter = response.headers.first(name: "Retry-After").flatMap { RetryAfter.seconds($0) }
                // The backend asks for a pause: every request of the run waits, retried or not.
                if let retryAfter, status == 429 || status == 503 {
                    pacer.pause(seconds: retryAfter)
                    paused = true
                }
                // The body within the same 30 s as the head: AsyncHTTPClient's deadline ends with the head.
                let bytes = try await Deadline.collect(
                    response.body, limit: 16 << 20, until: min(started + .seconds(30), end ?? started + .seconds(30)))
                attempts?.record(nil)
                if status == 401 || status == 403 { return .failure(.unauthorized(status: status)) }
                outcome = .response(status: status, body: bytes)
                if status != 429 && status < 500 { return outcome }
            } catch {
                requests.record(endpoint, status: nil)
                let failure = transport.failure(error, proxy: proxy)
                attempts?.record(failure)
                outcome = .failure(failure)
            }
            if attempt >= retries || Task.isCancelled { return outcome }
            // A limited request retries only while another attempt could still connect: its last failure is its answer.
            if let end, ContinuousClock.now + transport.connectTimeout > end { return outcome }
            attempt += 1
            // After a pause the pacer holds the next attempt back; else this request backs off.
            if !paused {
                let delay = min(RetryAfter.limit, retryAfter ?? 0.2 * pow(2, Double(attempt - 1)))
                try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
            }
        }
    }
}
