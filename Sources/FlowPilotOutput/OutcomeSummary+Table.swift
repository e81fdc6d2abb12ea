import FlowPilotCore
import Foundation

/// The per-placement summary as a table: the same columns as its JSON, in text and CSV.
extension OutcomeSummary {
    public static let columns = [
        "placement", "identities", "warmed", "network", "cache", "stale_cache", "bundled_default", "no_flow", "failed",
        "errors", "media_warmed_pct", "p50_ms", "p95_ms", "p99_ms",
    ]

    /// Placements, then the total row.
    public func table() -> Table {
        Table(columns: Self.columns, rows: (placements + [total]).map(Self.cells))
    }

    private static func cells(_ row: OutcomeSummary.Row) -> [String] {
        let errors = row.failures.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return [
            row.placement, String(row.outcomes), String(row.warmedTotal),
            String(row.warmed[.network] ?? 0), String(row.warmed[.cache] ?? 0),
            String(row.warmed[.staleCache] ?? 0), String(row.warmed[.bundledDefault] ?? 0),
            String(row.noFlow), String(row.failed), errors.isEmpty ? "-" : errors,
            row.mediaWarmedPercent.map { String(format: "%.1f", $0) } ?? "-",
            row.latency(atPercentile: 50).map(String.init) ?? "-",
            row.latency(atPercentile: 95).map(String.init) ?? "-",
            row.latency(atPercentile: 99).map(String.init) ?? "-",
        ]
    }
}

/// `fpctl report`: the per-placement summary over warm outputs, with the
/// runs they came from and the rows read.
public struct WarmReportSummary: Rendering {
    public let result: WarmReport.Result

    public init(_ result: WarmReport.Result) { self.result = result }

    public func text() -> String { result.summary.table().text() }

    public var table: Table? { result.summary.table() }

    public var document: JSONValue {
        .object([
            "runs": .array(result.runs.map(\.json)), "rows": .number(Double(result.rows)),
            "summary": result.summary.json,
        ])
    }
}
