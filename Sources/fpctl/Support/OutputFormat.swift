import ArgumentParser
import FlowPilotCore
import FlowPilotOutput

/// `--format table|json|csv`. Not CaseIterable on purpose: the value list is in the
/// help text, and generate-manual would otherwise emit an empty paragraph.
enum OutputFormat: String, ExpressibleByArgument {
    case table, json, csv
}

struct FormatOption: ParsableArguments {
    @Option(help: "Output format: table, json or csv.", completion: .list(["table", "json", "csv"]))
    var format: OutputFormat = .table

    /// A table as text or CSV (JSON is each command's own shape).
    func render(_ table: Table) -> String {
        format == .csv ? table.csv() : table.text()
    }
}
