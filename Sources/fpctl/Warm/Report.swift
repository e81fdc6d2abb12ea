import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "One per-placement summary over the JSON outputs of warm runs (shards of one run, or many runs)",
        discussion: """
            Reads the outputs of fpctl warm --format json, streaming their rows, and
            prints the per-placement summary warm prints for one run (identities;
            warmed by delivery_source; no_flow; failed by error code; media_warmed %;
            resolve p50/p95/p99 ms; a TOTAL row) for all of them together.
            Outputs of one --run-id must be distinct shards of one split (K/N with the
            same N): the same shard twice, a whole run beside one of its shards, or a
            row outside its file's shard is refused (rule report-overlap), naming
            both files, because its rows would count twice.
            An attempt that another resumed (warm --resume, or --output-dir's
            attempts) counts once with it: its failed rows are the retried ones.
            A directory stands for the *.json files in it, such as the DIR/RUN_ID
            of warm --output-dir, whose attempts of every shard it holds.
            Exit status: 0, 65 an input is not a complete warm JSON output or
            overlaps another, 66 an input is missing.
            """
    )

    @Argument(help: "JSON outputs of fpctl warm --format json, or directories of them (warm --output-dir).")
    var files: [String]
    @OptionGroup var output: FormatOption<WarmReportSummary>

    func run() throws {
        let result = try WarmReport.summarize(files)
        try output.print(WarmReportSummary(result))
        let runs = Set(result.runs.map(\.runID)).count
        Console.note("\(result.rows) rows from \(result.files) files, \(runs) run\(runs == 1 ? "" : "s")")
    }
}
