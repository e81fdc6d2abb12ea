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
    /// The earlier attempt this run resumed (`warm --resume`): how many whole
    /// rows it had and their digest (`WarmOutputFile.WholeRows`), which is how
    /// `report` recognises that file, killed or not, beside this one.
    public var resumedFrom: ResumedFrom?

    public struct ResumedFrom: Sendable, Equatable {
        public let rows: Int
        public let sha256: String

        public init(rows: Int, sha256: String) {
            (self.rows, self.sha256) = (rows, sha256)
        }
    }

    public init(
        runID: String, shard: Shard?, placements: [String], startedAt: Date, endedAt: Date,
        resumedFrom: ResumedFrom? = nil
    ) {
        self.runID = runID
        self.shard = shard
        self.placements = placements
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.resumedFrom = resumedFrom
    }

    public var json: JSONValue {
        var members: [ExactName: JSONValue] = [
            "run_id": .string(runID), "shard": shard.map { .string($0.description) } ?? .null,
            "placements": .array(placements.map(JSONValue.string)),
            "started_at": .string(RFC3339.string(startedAt)), "ended_at": .string(RFC3339.string(endedAt)),
        ]
        if let resumedFrom {
            members["resumed_from"] = .object([
                "rows": .number(Double(resumedFrom.rows)), "sha256": .string(resumedFrom.sha256),
            ])
        }
        return .object(members)
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
        switch json["resumed_from"] {
        case nil, .null?: resumedFrom = nil
        case let value?:
            guard let rows = value["rows"]?.numberValue, let sha256 = value["sha256"]?.stringValue else { return nil }
            resumedFrom = ResumedFrom(rows: Int(rows), sha256: sha256)
        }
    }
}
