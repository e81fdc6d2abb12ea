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
        /// The files read (a directory counts its outputs).
        public var files: Int { runs.count }
    }

    /// `paths` are warm outputs, or directories whose `*.json` files are
    /// (`warm --output-dir`'s `DIR/RUN_ID`).
    public static func summarize(_ paths: [String]) throws -> Result {
        let (files, resumed) = try load(WarmAttempts.expand(paths))
        try checkRuns(files, resumed: resumed)
        var summary = OutcomeSummary()
        var rows = 0
        for (index, file) in files.enumerated() {
            let earlier = resumed[index]
            func count(_ row: WarmOutputFile.Row) throws {
                if let shard = file.run.shard, !shard.contains(fingerprint: row.fingerprint) {
                    throw misplaced(row, in: file, among: files)
                }
                // A resumed attempt's failed rows were tried again by the run that resumed it.
                if earlier != nil, row.state == .failed { return }
                summary.add(
                    placement: row.placement, state: row.state, deliverySource: row.deliverySource,
                    errorCode: row.errorCode, mediaWarmed: row.mediaWarmed, milliseconds: row.milliseconds)
                rows += 1
            }
            if earlier?.cutShort == true {
                _ = try WarmOutputFile.wholeRows(path: file.path, count)
            } else {
                try file.forEachRow(count)
            }
        }
        return Result(summary: summary, runs: files.map(\.run), rows: rows)
    }

    /// An input another input resumed (`warm --resume`): which one, and whether
    /// it was cut short (no last line, so no run of its own).
    struct Resumed {
        let by: Int
        let cutShort: Bool
    }

    /// Every input, with the inputs other inputs resumed. A file cut short is
    /// accepted only as the earlier attempt of another input, which names its
    /// whole rows by their digest; it then stands for that input's run.
    static func load(_ paths: [String]) throws -> ([WarmOutputFile], [Int: Resumed]) {
        var files: [WarmOutputFile?] = []
        var failures: [Int: Error] = [:]
        for (i, path) in paths.enumerated() {
            do { files.append(try WarmOutputFile(path: path)) } catch let error as FPError {
                guard case .invalid = error else { throw error }
                files.append(nil)
                failures[i] = error
            }
        }
        var resumed: [Int: Resumed] = [:]
        let resumers = files.enumerated().compactMap { i, file in file?.run.resumedFrom.map { (i, $0) } }
        if !resumers.isEmpty {
            for (i, path) in paths.enumerated() {
                guard let whole = try? WarmOutputFile.wholeRows(path: path, { _ in }) else { continue }
                guard let (by, _) = resumers.first(where: { $0.0 != i && $0.1.sha256 == whole.sha256 }) else {
                    continue
                }
                resumed[i] = Resumed(by: by, cutShort: files[i] == nil)
                if files[i] == nil, let resumer = files[by] {
                    files[i] = WarmOutputFile(path: path, run: resumer.run)
                }
            }
        }
        for (i, error) in failures.sorted(by: { $0.key < $1.key }) where files[i] == nil { throw error }
        return (files.compactMap { $0 }, resumed)
    }

    /// Outputs sharing a run id must be distinct shards of one split.
    /// An attempt and the run that resumed it share their run id and shard, and
    /// count once between them (`summarize` skips the attempt's failed rows).
    static func checkRuns(_ files: [WarmOutputFile], resumed: [Int: Resumed] = [:]) throws {
        /// The first attempt of the chain of resumptions `index` belongs to.
        func chain(_ index: Int) -> Int {
            var first = index
            while let earlier = resumed.first(where: { $0.value.by == first })?.key { first = earlier }
            return first
        }
        for (i, file) in files.enumerated() {
            for (j, earlier) in files[..<i].enumerated() where earlier.run.runID == file.run.runID {
                if chain(i) == chain(j) { continue }
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
