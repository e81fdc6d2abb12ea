import Foundation
import Testing

@testable import FlowPilotCore

/// The warm JSON document has one writer and one reader in the library: what a
/// library caller writes with `WarmOutputFile.Writer`, `fpctl report` reads.
@Suite("the warm document, written by the library and read back")
struct WarmDocumentTests {
    @Test("rows and the closing line from Writer are what WarmOutputFile and WarmReport read")
    func writtenThenRead() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fpctl-doc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let outcomes = ["alice", "bob", "carol"].map {
            PrefetchOutcome(Identity(userID: $0), "paywall", .noFlow, mediaWarmed: false, since: .now)
        }
        var summary = OutcomeSummary()
        var writer = WarmOutputFile.Writer(rows: true)
        var document = writer.start
        for outcome in outcomes {
            document += writer.row(outcome)
            summary.add(outcome)
        }
        let run = WarmRunInfo(
            runID: "run-1", shard: nil, placements: ["paywall"], startedAt: Date(timeIntervalSince1970: 0),
            endedAt: Date(timeIntervalSince1970: 1))
        document += writer.finish(run: run, summary: summary)
        let path = dir.appendingPathComponent("warm.json").path
        try document.write(to: URL(fileURLWithPath: path))

        #expect(try JSONValue.parse(document)["rows"]?.arrayValue?.count == 3, "one JSON document")
        #expect(try WarmOutputFile(path: path).run.runID == "run-1")
        let report = try WarmReport.summarize([path])
        #expect(report.rows == 3)
        #expect(report.summary.total.noFlow == 3)
        #expect(report.runs.map(\.runID) == ["run-1"])
    }
}
