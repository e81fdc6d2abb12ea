import FlowPilotCore
import Foundation

/// The warm outcome table, streamed: rows are written as identities finish, so a
/// million identities never sit in memory. JSON is a `rows` array; CSV has a
/// header; the table uses fixed column widths.
final class OutcomeReport {
    let format: OutputFormat
    private let out = BufferedOutput()
    private var count = 0
    static let columns = [
        "identity", "placement", "state", "from_cache", "delivery_source", "media_warmed", "flow", "version", "ttl",
        "ms", "error",
    ]
    static let widths = [22, 16, 8, 10, 15, 12, 20, 12, 5, 6]

    init(format: OutputFormat) {
        self.format = format
        switch format {
        case .json: out.write("{\"rows\":[")
        case .csv: out.write(Self.columns.joined(separator: ",") + "\n")
        case .table: out.write(line(Self.columns.map { $0.uppercased() }))
        }
    }

    func add(_ o: PrefetchOutcome) {
        let identity =
            "\(o.identity.userID.isEmpty ? "(anonymous)" : o.identity.userID) \(o.identity.fingerprint.prefix(8))"
        let error = o.errorCode.map { "\($0): \(o.errorMessage ?? "")" } ?? ""
        let cells = [
            identity, o.placement, o.state.rawValue, o.state == .warmed ? String(o.fromCache) : "",
            o.deliverySource?.rawValue ?? "", String(o.mediaWarmed), o.flowID ?? "", o.version ?? "",
            o.ttlSeconds.map(String.init) ?? "", String(o.milliseconds), error,
        ]
        switch format {
        case .table: out.write(line(cells))
        case .csv: out.write(Table(columns: cells).csv())
        case .json:
            let row: JSONValue = .object([
                "user_id": .string(o.identity.userID), "fingerprint": .string(o.identity.fingerprint),
                "placement": .string(o.placement), "state": .string(o.state.rawValue),
                "from_cache": o.state == .warmed ? .bool(o.fromCache) : .null,
                "delivery_source": o.deliverySource.map { .string($0.rawValue) } ?? .null,
                "media_warmed": .bool(o.mediaWarmed), "flow_id": o.flowID.map(JSONValue.string) ?? .null,
                "version": o.version.map(JSONValue.string) ?? .null,
                "ttl_seconds": o.ttlSeconds.map { .number(Double($0)) } ?? .null, "ms": .number(Double(o.milliseconds)),
                "error": o.errorCode.map { .object(["code": .string($0), "message": .string(o.errorMessage ?? "")]) }
                    ?? .null,
            ])
            out.write(count == 0 ? "\n" : ",\n")
            out.write(CanonicalJSON.data(row))
        }
        count += 1
    }

    func finish() {
        if format == .json { out.write("\n],\"schema_version\":\(JSONOutput.schemaVersion)}\n") }
        out.flush()
    }

    private func line(_ cells: [String]) -> String {
        var s = ""
        for (i, c) in cells.enumerated() {
            s += c
            if i < Self.widths.count { s += String(repeating: " ", count: max(1, Self.widths[i] - c.count + 1)) }
        }
        return s.trimmingCharacters(in: .whitespaces) + "\n"
    }
}
