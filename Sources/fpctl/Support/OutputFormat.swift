import ArgumentParser
import FlowPilotCore
import FlowPilotOutput

/// `--format text|json|csv`, `table` accepted as another name for `text`
/// (FlowPilotOutput's `OutputFormat`); `FormatOption` says which a command takes.
extension OutputFormat: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public var defaultValueDescription: String { rawValue }

}

/// `--format` for every command that has one, whose result is a `Result`:
/// the formats it takes, its help, its "values" and its completion all come
/// from `Result.reportFormats` (text, json and csv where the result has them;
/// the CI formats too for a findings result, `FindingsRendering`), so a
/// format the result lacks is neither offered nor taken (a usage error, 64,
/// before any work, worded by `Result.unsupported`).
struct FormatOption<Result: OffersFormats>: ParsableArguments {
    @Option(
        name: .customLong("format"), help: ArgumentHelp("Output format: \(Self.formatList)."),
        completion: .list(Self.names))
    var choice = FormatChoice<Result>(.plain(.text))

    /// The format asked for, a CI format included.
    var report: ReportFormat { choice.value }

    /// The plain format asked for (text, json or csv); `validate` has refused
    /// a CI format for any result but findings, which print through `report`.
    var format: OutputFormat {
        if case .plain(let format) = report { format } else { .text }
    }

    /// The names the option takes, `table` beside `text`.
    static var names: [String] { Result.reportFormats.flatMap { $0 == .plain(.text) ? ["text", "table"] : [$0.name] } }

    /// `text (or table, the same), json or csv`.
    static var formatList: String {
        let names = Result.reportFormats.map { $0 == .plain(.text) ? "text (or table, the same)" : $0.name }
        return names.count == 1 ? names[0] : names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
    }

    func validate() throws {
        if let problem = Result.unsupported(report) { throw ValidationError(problem) }
    }
}

/// A value of `--format` for a `Result`: any format's name parses (so a
/// format the result lacks gets `FormatOption`'s one-line refusal), and the
/// help's "values" are the result's own.
struct FormatChoice<Result: OffersFormats>: ExpressibleByArgument {
    let value: ReportFormat

    init(_ value: ReportFormat) { self.value = value }

    init?(argument: String) {
        guard let value = ReportFormat(name: argument) else { return nil }
        self.value = value
    }

    static var allValueStrings: [String] { Result.reportFormats.map(\.name) }
    var defaultValueDescription: String { value.name }
}

extension FormatOption where Result: Rendering {
    /// `result` as the format asked for, on standard output.
    func print(_ result: Result) throws {
        Console.out(try result.rendered(as: format))
    }
}
