import Foundation

/// `fpctl report`: one per-placement summary over the rows of several warm
/// outputs, the shards of one run or runs of different days. Inputs whose rows
/// would count twice are refused (`report-overlap`, naming both files): two
/// outputs of one run id that are both the whole run, the same shard, or shards
/// of different splits; or a row of a shard output that belongs to another shard
/// of its run. Memory stays bounded: rows stream and are counted, never kept.
public enum WarmReport {
    public struct Result: Sendable {
        public let summary: OutcomeSummary
        public let runs: [WarmRunInfo]
        public let rows: Int
    }

    public static func summarize(_ paths: [String]) throws -> Result {
        let files = try paths.map(WarmOutputFile.init(path:))
        try checkRuns(files)
        var summary = OutcomeSummary()
        var rows = 0
        for file in files {
            try file.forEachRow { row in
                if let shard = file.run.shard, !shard.contains(fingerprint: row.fingerprint) {
                    throw misplaced(row, in: file, among: files)
                }
                summary.add(
                    placement: row.placement, state: row.state, deliverySource: row.deliverySource,
                    errorCode: row.errorCode, mediaWarmed: row.mediaWarmed, milliseconds: row.milliseconds)
                rows += 1
            }
        }
        return Result(summary: summary, runs: files.map(\.run), rows: rows)
    }

    /// Outputs sharing a run id must be distinct shards of one split.
    static func checkRuns(_ files: [WarmOutputFile]) throws {
        for (i, file) in files.enumerated() {
            for earlier in files[..<i] where earlier.run.runID == file.run.runID {
                let run = file.run.runID
                guard let shard = file.run.shard, let earlierShard = earlier.run.shard else {
                    throw overlap(file, earlier, "both hold rows of run \(run), and one of them is the whole run")
                }
                if shard.count != earlierShard.count {
                    throw overlap(
                        file, earlier, "shards \(earlierShard) and \(shard) of run \(run) split it differently")
                }
                if shard == earlierShard { throw overlap(file, earlier, "both are shard \(shard) of run \(run)") }
            }
        }
    }

    /// A row outside its file's shard: which other input holds that shard, if any.
    private static func misplaced(_ row: WarmOutputFile.Row, in file: WarmOutputFile, among files: [WarmOutputFile])
        -> FPError
    {
        let count = file.run.shard?.count ?? 1
        let home = Shard.index(of: row.fingerprint, among: count)
        let what =
            "(\(row.userID.isEmpty ? "anonymous" : row.userID), \(row.placement)) belongs to shard \(home)/\(count)"
        if let holder = files.first(where: { $0.run.runID == file.run.runID && $0.run.shard?.index == home }) {
            let claimed = file.run.shard?.description ?? "-"
            return overlap(file, holder, "\(what) of run \(file.run.runID) but is also a row of shard \(claimed)")
        }
        return .invalid([
            .error(
                "report-overlap", file.path, "\(what), not to this file's shard \(file.run.shard?.description ?? "")")
        ])
    }

    /// Names both files: `report-overlap: EARLIER and LATER: MESSAGE; rows would count twice`.
    private static func overlap(_ file: WarmOutputFile, _ other: WarmOutputFile, _ message: String) -> FPError {
        .invalid([.error("report-overlap", "\(other.path) and \(file.path)", "\(message); rows would count twice")])
    }
}
