import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

extension ReportFormat: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public var defaultValueDescription: String { "text" }
}

/// `--format` of the commands whose result is findings (`bundle build`,
/// `bundle validate`, `bundle diff`), declared once: its help and completion
/// come from the result's formats, its check runs before any work, and
/// `print` is the one path every format takes (`FindingsRendering.rendered(as:)`).
struct FindingsFormatOption<Result: FindingsRendering>: ParsableArguments {
    @Option(
        help: ArgumentHelp("Output format: \(Self.formatList)."),
        completion: .list(
            ReportFormat.names(plain: Result.formats).flatMap { $0 == "text" ? ["text", "table"] : [$0] }))
    var format: ReportFormat = .plain(.text)

    /// `text (or table), json, sarif, github, junit or gitlab`.
    private static var formatList: String {
        let names = ReportFormat.names(plain: Result.formats).map { $0 == "text" ? "text (or table)" : $0 }
        return names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
    }

    func validate() throws {
        if let problem = Result.unsupported(format) { throw ValidationError(problem) }
    }

    /// `result` in the format asked for: standard error's lines around
    /// standard output's; for `github`, also its Markdown table appended to
    /// `$GITHUB_STEP_SUMMARY` when that is set.
    func print(_ result: Result) throws {
        let printout = try result.rendered(as: format)
        printout.before.forEach(Self.write)
        Console.out(printout.output)
        printout.after.forEach(Self.write)
        if printout.format == .github { Self.appendStepSummary(result.findingsReport) }
    }

    private static func write(_ diagnostic: Diagnostic) {
        switch diagnostic {
        case .finding(let line): Console.raw(line + "\n")
        case .error(let message): Console.error(message)
        }
    }

    private static func appendStepSummary(_ report: FindingsReport) {
        guard let path = ProcessInfo.processInfo.environment["GITHUB_STEP_SUMMARY"], !path.isEmpty else { return }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            Console.warn("GITHUB_STEP_SUMMARY=\(path): cannot open (\(Errno.describe(errno)))")
            return
        }
        defer { close(fd) }
        var summary = report.stepSummary()
        if let code = summary.withUTF8({ writeAll(fd, UnsafeRawBufferPointer($0)) }) {
            Console.warn("GITHUB_STEP_SUMMARY=\(path): cannot write (\(Errno.describe(code)))")
        }
    }
}
