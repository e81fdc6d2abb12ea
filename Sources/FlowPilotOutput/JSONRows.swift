import FlowPilotCore
import Foundation

/// A JSON document of many rows, made a piece at a time so that a listing of
/// 100,000 entries never sits in memory as one value: `{"rows":[`, each row as
/// compact canonical JSON on a line of its own, then `],"schema_version":1}`.
public struct JSONRows: Sendable {
    private var written = 0

    public init() {}

    /// The document's opening.
    public let start = #"{"rows":["#

    /// One row, after the separator it needs.
    public mutating func row(_ value: JSONValue) -> Data {
        defer { written += 1 }
        return Data((written == 0 ? "\n" : ",\n").utf8) + CanonicalJSON.data(value)
    }

    /// The document's end, with its `schema_version`.
    public var end: String { "\n],\"schema_version\":\(JSONOutput.schemaVersion)}\n" }
}
