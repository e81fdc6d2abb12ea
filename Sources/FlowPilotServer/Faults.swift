import Foundation

/// Faults `fpctl serve` injects into resolve responses, set by flags at start and
/// replaced at run time with `POST /_admin/faults` (docs/serve.md).
public struct Faults: Codable, Sendable, Equatable {
    /// Added latency in milliseconds: `[ms]` fixed or `[min, max]` uniform.
    public var latencyMilliseconds: [Int]?
    /// Fraction (0...1) of resolve requests that fail with `fail_status`.
    public var failRate: Double?
    public var failStatus: Int?
    /// `Retry-After` seconds sent with failures.
    public var retryAfter: Int?
    /// The batch endpoint answers 404, as a backend without it would.
    public var batchDisabled: Bool?
    /// The JSON body is cut in half (a complete HTTP response with invalid JSON).
    public var truncateBody: Bool?
    /// The body is not JSON at all.
    public var invalidJSON: Bool?
    /// The connection closes after half the body was sent.
    public var closeConnection: Bool?
    /// Placements that answer `flow: null`.
    public var noFlow: [String]?
    /// Flows that fail validation: an empty id and no screens (clients must not cache them).
    public var invalidFlow: Bool?
    /// Media and font routes answer 404 (broken image URLs).
    public var failMedia: Bool?
    /// Resolves are held, in flight, until the fault set is replaced
    /// (`POST` or `DELETE /_admin/faults`): a test sees a request in flight
    /// for as long as it needs, not for a latency it must look within.
    public var hold: Bool?
    /// When set, the faults above apply to these placements only.
    public var placements: [String]?

    public init() {}

    /// The JSON names of `POST /_admin/faults` (docs/serve.md).
    enum CodingKeys: String, CodingKey {
        case latencyMilliseconds = "latency_ms"
        case failRate = "fail_rate"
        case failStatus = "fail_status"
        case retryAfter = "retry_after"
        case batchDisabled = "batch_disabled"
        case truncateBody = "truncate_body"
        case invalidJSON = "invalid_json"
        case closeConnection = "close_connection"
        case noFlow = "no_flow"
        case invalidFlow = "invalid_flow"
        case failMedia = "fail_media"
        case hold
        case placements
    }

    /// No fault would change a response: it can come from the pre-encoded cache.
    /// (`fail_status` and `retry_after` only shape failures `fail_rate` causes.)
    var isEmpty: Bool {
        (latencyMilliseconds ?? []).allSatisfy { $0 == 0 } && (failRate ?? 0) == 0 && truncateBody != true
            && invalidJSON != true && closeConnection != true && (noFlow ?? []).isEmpty && invalidFlow != true
            && hold != true
    }

    func applies(to placement: String) -> Bool {
        placements.map { $0.contains(placement) } ?? true
    }

    /// Validated: rates within 0...1, statuses 4xx/5xx, latencies non-negative.
    func validationError() -> String? {
        if let r = failRate, !(0...1).contains(r) { return "fail_rate must be between 0 and 1" }
        if let s = failStatus, !(400...599).contains(s) { return "fail_status must be a 4xx or 5xx status" }
        if let l = latencyMilliseconds,
            l.isEmpty || l.count > 2 || l.contains(where: { $0 < 0 }) || (l.count == 2 && l[0] > l[1])
        {
            return "latency_ms must be [ms] or [min, max] with 0 <= min <= max"
        }
        return nil
    }

    func delayMilliseconds() -> Int {
        guard let l = latencyMilliseconds, let first = l.first else { return 0 }
        return l.count == 2 ? Int.random(in: first...l[1]) : first
    }

    func shouldFail() -> Bool {
        guard let rate = failRate, rate > 0 else { return false }
        return rate >= 1 || Double.random(in: 0..<1) < rate
    }
}
