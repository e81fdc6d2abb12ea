import ArgumentParser
import FlowPilotCore
import FlowPilotOutput

/// `--format text|json|csv`, `table` accepted as another name for `text`
/// (FlowPilotOutput's `OutputFormat`); `FormatOption` says which a command takes.
extension OutputFormat: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public var defaultValueDescription: String { rawValue }

}

/// `--format` for a command whose result is a `Result`: the formats it takes,
/// its help and its completion come from `Result.formats`, so a format the
/// result lacks is neither offered nor taken (a usage error, 64, before any
/// work). The findings commands' `FindingsFormatOption` is the same for
/// `ReportFormat`, which adds the CI formats.
struct FormatOption<Result: OffersFormats>: ParsableArguments {
    @Option(
        name: .customLong("format"), help: ArgumentHelp("Output format: \(Self.formatList)."),
        completion: .list(Self.names))
    var choice = FormatChoice<Result>(.text)

    /// The format asked for.
    var format: OutputFormat { choice.value }

    /// The names the option takes, `table` beside `text`.
    static var names: [String] { Result.formats.flatMap { $0 == .text ? ["text", "table"] : [$0.rawValue] } }

    /// `text (or table, the same), json or csv`.
    static var formatList: String {
        let names = Result.formats.map { $0 == .text ? "text (or table, the same)" : $0.rawValue }
        return names.count == 1 ? names[0] : names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
    }

    func validate() throws {
        guard Result.formats.contains(format) else {
            throw ValidationError(
                "--format \(format.rawValue): this command prints \(Result.formats.map(\.rawValue).joined(separator: " or "))"
            )
        }
    }
}

/// A value of `--format` for a `Result`: any format's name parses (so a
/// format the result lacks gets `FormatOption`'s one-line refusal), and the
/// help's "values" are the result's own.
struct FormatChoice<Result: OffersFormats>: ExpressibleByArgument {
    let value: OutputFormat

    init(_ value: OutputFormat) { self.value = value }

    init?(argument: String) {
        guard let value = OutputFormat(name: argument) else { return nil }
        self.value = value
    }

    static var allValueStrings: [String] { Result.formats.map(\.rawValue) }
    var defaultValueDescription: String { value.rawValue }
}

extension FormatOption where Result: Rendering {
    /// `result` as the format asked for, on standard output.
    func print(_ result: Result) throws {
        Console.out(try result.rendered(as: format))
    }
}
