import ArgumentParser
import FlowPilotCore
import FlowPilotOutput

/// `--format text|json|csv`, `table` accepted as another name for `text`
/// (FlowPilotOutput's `OutputFormat`). Not CaseIterable here on purpose: the
/// value list is in the help text, and generate-manual would otherwise emit an
/// empty paragraph.
extension OutputFormat: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public var defaultValueDescription: String { rawValue }

    /// A usage error, before any work is done, when a result lacks this format.
    func require(_ formats: [OutputFormat], of command: String) throws {
        guard formats.contains(self) else {
            throw ValidationError(
                "--format \(rawValue): \(command) prints \(formats.map(\.rawValue).joined(separator: " or "))")
        }
    }
}

struct FormatOption: ParsableArguments {
    @Option(
        help: "Output format: text (or table, the same), json or csv.",
        completion: .list(["text", "table", "json", "csv"]))
    var format: OutputFormat = .text

    /// `result` as the format asked for, on standard output.
    func print(_ result: some Rendering) throws {
        Console.out(try result.rendered(as: format))
    }
}
