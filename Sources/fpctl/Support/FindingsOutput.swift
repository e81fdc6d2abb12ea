import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

/// `--format` of `bundle build`, `bundle validate` and `bundle diff`: the
/// command's own text, JSON (and, for diff, CSV), or one of the formats CI
/// shows findings in (`FindingsFormat`: sarif, github, junit, gitlab).
enum ReportFormat: Equatable, ExpressibleByArgument {
    case plain(OutputFormat)
    case findings(FindingsFormat)

    init?(argument: String) {
        if let f = FindingsFormat(rawValue: argument) {
            self = .findings(f)
        } else if let p = OutputFormat(name: argument) {
            self = .plain(p)
        } else {
            return nil
        }
    }

    var defaultValueDescription: String { "text" }

    var name: String {
        switch self {
        case .plain(let p): p.rawValue
        case .findings(let f): f.rawValue
        }
    }

    /// A usage error, before any work is done, for `--format csv` where there is no table.
    func require(plain formats: [OutputFormat], of command: String) throws {
        if case .plain(let p) = self, !formats.contains(p) {
            let names = formats.map(\.rawValue) + FindingsFormat.allCases.map(\.rawValue)
            throw ValidationError("--format \(p.rawValue): \(command) prints \(names.joined(separator: ", "))")
        }
    }
}

enum FindingsOutput {
    /// The report in a CI format on standard output; for `github`, also its
    /// Markdown table appended to `$GITHUB_STEP_SUMMARY` when that is set.
    static func print(_ report: FindingsReport, as format: FindingsFormat) {
        Console.out(report.rendered(as: format))
        guard format == .github, let path = ProcessInfo.processInfo.environment["GITHUB_STEP_SUMMARY"], !path.isEmpty
        else { return }
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

    /// Findings as text lines on standard error (`FILE:LINE:COL: error: RULE: message`),
    /// at most `Array.shownPerRuleAndFile` of a rule in a file.
    static func printText(_ target: FindingsReport.Target, command: String) {
        for l in FindingsReport(command: command, targets: [target.bounded]).located {
            Console.raw(FindingsReport.textLine(l) + "\n")
        }
    }
}
