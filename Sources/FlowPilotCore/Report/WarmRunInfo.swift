import Foundation

/// What identifies a warm run, written into its JSON output as `run`: the run
/// id every shard of one run shares (`--run-id`), which shard this output is,
/// the placements warmed, and when it started and ended.
public struct WarmRunInfo: Sendable, Equatable {
    public var runID: String
    public var shard: Shard?
    public var placements: [String]
    public var startedAt: Date
    public var endedAt: Date

    public init(runID: String, shard: Shard?, placements: [String], startedAt: Date, endedAt: Date) {
        self.runID = runID
        self.shard = shard
        self.placements = placements
        self.startedAt = startedAt
        self.endedAt = endedAt
    }

    public var json: JSONValue {
        .object([
            "run_id": .string(runID), "shard": shard.map { .string($0.description) } ?? .null,
            "placements": .array(placements.map(JSONValue.string)),
            "started_at": .string(RFC3339.string(startedAt)), "ended_at": .string(RFC3339.string(endedAt)),
        ])
    }

    /// The `run` object as `json` writes it; nil when a field is missing or malformed.
    public init?(json: JSONValue) {
        guard let runID = json["run_id"]?.stringValue, !runID.isEmpty,
            let placements = json["placements"]?.arrayValue?.compactMap(\.stringValue),
            let startedAt = json["started_at"]?.stringValue.flatMap(RFC3339.parse),
            let endedAt = json["ended_at"]?.stringValue.flatMap(RFC3339.parse)
        else { return nil }
        switch json["shard"] {
        case .null?: shard = nil
        case .string(let text)?:
            guard let parsed = Shard(text) else { return nil }
            shard = parsed
        default: return nil
        }
        (self.runID, self.placements, self.startedAt, self.endedAt) = (runID, placements, startedAt, endedAt)
    }
}
