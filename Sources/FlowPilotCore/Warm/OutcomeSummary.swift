import Foundation
import Histogram

/// Per placement, what warming came to: outcomes, warmed by delivery source,
/// no flow, failed by error code, media warmed, and resolve latency percentiles
/// from an HdrHistogram (bounded memory whatever the number of outcomes). `fpctl
/// warm` summarises its own run with it, `fpctl report` many runs' rows.
public struct OutcomeSummary: Sendable {
    public struct Row: Sendable {
        public let placement: String
        public private(set) var outcomes = 0
        public private(set) var warmed: [Tier: Int] = [:]
        public private(set) var noFlow = 0
        public private(set) var failures: [String: Int] = [:]
        /// Warmed outcomes whose images were warmed.
        public private(set) var mediaWarmed = 0
        private var latency = Histogram<UInt64>(
            highestTrackableValue: OutcomeSummary.maxMilliseconds, numberOfSignificantValueDigits: .three)

        init(placement: String) { self.placement = placement }

        public var warmedTotal: Int { warmed.values.reduce(0, +) }
        public var failed: Int { failures.values.reduce(0, +) }

        /// Percent of warmed outcomes whose images were warmed; nil when none was warmed.
        public var mediaWarmedPercent: Double? {
            warmedTotal == 0 ? nil : Double(mediaWarmed) * 100 / Double(warmedTotal)
        }

        /// Milliseconds to an outcome at `percentile` (0...100); nil without outcomes.
        public func latency(atPercentile percentile: Double) -> Int? {
            outcomes == 0 ? nil : Int(latency.valueAtPercentile(percentile))
        }

        mutating func add(_ state: PrefetchOutcome.State, _ source: Tier?, _ error: String?, _ media: Bool, _ ms: Int) {
            outcomes += 1
            switch state {
            case .warmed:
                warmed[source ?? .network, default: 0] += 1
                if media { mediaWarmed += 1 }
            case .noFlow: noFlow += 1
            case .failed: failures[error ?? "error", default: 0] += 1
            }
            _ = latency.record(UInt64(min(max(ms, 0), Int(OutcomeSummary.maxMilliseconds))))
        }

        mutating func merge(_ other: Row) {
            outcomes += other.outcomes
            warmed.merge(other.warmed, uniquingKeysWith: +)
            noFlow += other.noFlow
            failures.merge(other.failures, uniquingKeysWith: +)
            mediaWarmed += other.mediaWarmed
            latency.add(other.latency)
        }
    }

    /// Latencies above an hour are counted as an hour.
    static let maxMilliseconds: UInt64 = 3_600_000

    private var rows: [ExactName: Row] = [:]

    public init() {}

    public mutating func add(_ outcome: PrefetchOutcome) {
        add(
            placement: outcome.placement, state: outcome.state, deliverySource: outcome.deliverySource,
            errorCode: outcome.errorCode, mediaWarmed: outcome.mediaWarmed, milliseconds: outcome.milliseconds)
    }

    public mutating func add(
        placement: String, state: PrefetchOutcome.State, deliverySource: Tier?, errorCode: String?,
        mediaWarmed: Bool, milliseconds: Int
    ) {
        rows[ExactName(placement), default: Row(placement: placement)].add(
            state, deliverySource, errorCode, mediaWarmed, milliseconds)
    }

    /// One row per placement, by placement key.
    public var placements: [Row] { rows.values.sorted { ExactName($0.placement) < ExactName($1.placement) } }

    /// Every placement together.
    public var total: Row {
        rows.values.reduce(into: Row(placement: "TOTAL")) { $0.merge($1) }
    }

    // MARK: The warm JSON document

    /// `{"placements": [row…], "total": row}`, each row with the table's columns.
    public var json: JSONValue {
        .object(["placements": .array(placements.map(Self.json)), "total": Self.json(total)])
    }

    private static func json(_ row: Row) -> JSONValue {
        func number(_ value: Int?) -> JSONValue { value.map { .number(Double($0)) } ?? .null }
        return .object([
            "placement": .string(row.placement), "identities": number(row.outcomes), "warmed": number(row.warmedTotal),
            "network": number(row.warmed[.network] ?? 0), "cache": number(row.warmed[.cache] ?? 0),
            "stale_cache": number(row.warmed[.staleCache] ?? 0),
            "bundled_default": number(row.warmed[.bundledDefault] ?? 0),
            "no_flow": number(row.noFlow), "failed": number(row.failed),
            "errors": .object(row.failures.mapValues { JSONValue.number(Double($0)) }.exactKeys),
            "media_warmed_pct": row.mediaWarmedPercent.map { .number(($0 * 10).rounded() / 10) } ?? .null,
            "p50_ms": number(row.latency(atPercentile: 50)), "p95_ms": number(row.latency(atPercentile: 95)),
            "p99_ms": number(row.latency(atPercentile: 99)),
        ])
    }
}
