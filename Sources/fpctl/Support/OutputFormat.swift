import ArgumentParser
import FlowPilotCore

/// `--format table|json|csv` (table is the default on a terminal, as everywhere).
enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
    case table, json, csv
}

struct FormatOption: ParsableArguments {
    @Option(help: "Output format: table, json or csv.")
    var format: OutputFormat = .table
}
