import Foundation

/// What a resumed warm (`fpctl warm --resume PREVIOUS.json`) takes from an
/// earlier attempt's JSON output, killed or ended: the (identity, placement)
/// pairs it warmed or found no flow for, which are not tried again; its failed
/// pairs and the pairs it never reached are. docs/fleet.md, "Resuming".
public struct WarmResume: Sendable {
    /// The attempt's whole rows and their digest, which the resumed run's
    /// output names (`WarmRunInfo.resumedFrom`) so `report` can merge the two.
    public let previous: WarmOutputFile.WholeRows
    /// Pairs not tried again, and failed pairs that will be.
    public let kept: Int
    public let retried: Int
    private let done: Set<Pair>
    private let placements: [String]

    private struct Pair: Hashable {
        let identity: WarmRun.FingerprintKey
        let placement: Int
    }

    /// Reads `path`, which must be a warm output of these `placements` and this
    /// `shard`: rows of another placement or shard, or a run that names other
    /// placements or another shard, are `invalid` (rule `resume-input`), as is
    /// a file that is not a warm output at all. A missing file is `inputMissing`.
    /// `runID`, when given, must be the earlier run's.
    public static func read(_ path: String, placements: [String], shard: Shard?, runID: String? = nil) throws
        -> WarmResume
    {
        try read([path], placements: placements, shard: shard, runID: runID)
    }

    /// Every earlier attempt of a chain, oldest first (`warm --output-dir`):
    /// a pair any of them warmed or found no flow for is not tried again, a
    /// pair that failed in all that tried it is. The new output names the
    /// last one, which named the one before, so `report` links the chain.
    public static func read(_ paths: [String], placements: [String], shard: Shard?, runID: String? = nil) throws
        -> WarmResume
    {
        let index = Dictionary(
            placements.enumerated().map { (ExactName($1), $0) }, uniquingKeysWith: { first, _ in first })
        var done = Set<Pair>()
        var failed = Set<Pair>()
        var last: WarmOutputFile.WholeRows?
        for path in paths {
            let whole = try WarmOutputFile.wholeRows(path: path) { row in
                guard let placement = index[ExactName(row.placement)] else {
                    throw refused(path, "it holds rows of placement \(row.placement), which this run does not warm")
                }
                if let shard, !shard.contains(fingerprint: row.fingerprint) {
                    let home = Shard.index(of: row.fingerprint, among: shard.count)
                    throw refused(path, "it holds rows of shard \(home)/\(shard.count), not of this run's \(shard)")
                }
                let pair = Pair(identity: WarmRun.FingerprintKey(row.fingerprint), placement: placement)
                if row.state == .failed { failed.insert(pair) } else { done.insert(pair) }
            }
            if let run = whole.run {
                guard Set(run.placements.map { ExactName($0) }) == Set(placements.map { ExactName($0) }) else {
                    throw refused(
                        path,
                        "its run warmed \(run.placements.joined(separator: ", ")), not \(placements.joined(separator: ", "))"
                    )
                }
                guard run.shard == shard else {
                    throw refused(
                        path,
                        "its run is shard \(run.shard?.description ?? "none"), not \(shard?.description ?? "none")")
                }
                if let runID, !run.runID.sameBytes(as: runID) {
                    throw refused(path, "its run is \(run.runID), not --run-id \(runID)")
                }
            }
            last = whole
        }
        guard let last else { throw refused("--resume", "no earlier attempt was given") }
        return WarmResume(
            previous: last, kept: done.count, retried: failed.subtracting(done).count, done: done,
            placements: placements)
    }

    /// The placements still to warm for the identity with this fingerprint, in order.
    func remaining(fingerprint: String) -> [String] {
        let identity = WarmRun.FingerprintKey(fingerprint)
        return placements.enumerated().compactMap { i, placement in
            done.contains(Pair(identity: identity, placement: i)) ? nil : placement
        }
    }

    private static func refused(_ path: String, _ message: String) -> FPError {
        .invalid([.error("resume-input", path, "cannot be resumed: \(message)")])
    }
}
