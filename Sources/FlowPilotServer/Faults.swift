import Foundation

/// Faults `fpctl serve` injects into resolve responses, set by flags at start and
/// replaced at run time with `POST /_admin/faults` (docs/serve.md).
public struct Faults: Codable, Sendable, Equatable {
    /// Added latency in milliseconds: `[ms]` fixed or `[min, max]` uniform.
    public var latency_ms: [Int]?
    /// Fraction (0...1) of resolve requests that fail with `fail_status`.
    public var fail_rate: Double?
    public var fail_status: Int?
    /// `Retry-After` seconds sent with failures.
    public var retry_after: Int?
    /// The batch endpoint answers 404, as a backend without it would.
    public var batch_disabled: Bool?
    /// The JSON body is cut in half (a complete HTTP response with invalid JSON).
    public var truncate_body: Bool?
    /// The body is not JSON at all.
    public var invalid_json: Bool?
    /// The connection closes after half the body was sent.
    public var close_connection: Bool?
    /// Placements that answer `flow: null`.
    public var no_flow: [String]?
    /// Flows that fail validation: an empty id and no screens (clients must not cache them).
    public var invalid_flow: Bool?
    /// Media and font routes answer 404 (broken image URLs).
    public var fail_media: Bool?
    /// When set, the faults above apply to these placements only.
    public var placements: [String]?

    public init() {}

    /// No fault would change a response: it can come from the pre-encoded cache.
    /// (`fail_status` and `retry_after` only shape failures `fail_rate` causes.)
    var isEmpty: Bool {
        (latency_ms ?? []).allSatisfy { $0 == 0 } && (fail_rate ?? 0) == 0 && truncate_body != true
            && invalid_json != true && close_connection != true && (no_flow ?? []).isEmpty && invalid_flow != true
    }

    func applies(to placement: String) -> Bool {
        placements.map { $0.contains(placement) } ?? true
    }

    /// Validated: rates within 0...1, statuses 4xx/5xx, latencies non-negative.
    func validationError() -> String? {
        if let r = fail_rate, !(0...1).contains(r) { return "fail_rate must be between 0 and 1" }
        if let s = fail_status, !(400...599).contains(s) { return "fail_status must be a 4xx or 5xx status" }
        if let l = latency_ms, l.isEmpty || l.count > 2 || l.contains(where: { $0 < 0 }) || (l.count == 2 && l[0] > l[1]) {
            return "latency_ms must be [ms] or [min, max] with 0 <= min <= max"
        }
        return nil
    }

    func delayMilliseconds() -> Int {
        guard let l = latency_ms, let first = l.first else { return 0 }
        return l.count == 2 ? Int.random(in: first...l[1]) : first
    }

    func shouldFail() -> Bool {
        guard let rate = fail_rate, rate > 0 else { return false }
        return rate >= 1 || Double.random(in: 0..<1) < rate
    }
}
