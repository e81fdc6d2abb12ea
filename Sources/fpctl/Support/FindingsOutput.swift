import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

/// `--format` of the commands whose result is findings (`bundle build`,
/// `bundle validate`, `bundle diff`): `print` is the one path every format
/// takes (`FindingsRendering.rendered(as:)`), the CI formats included.
extension FormatOption where Result: FindingsRendering {
    /// `result` in the format asked for: standard error's lines around
    /// standard output's; for `github`, also its Markdown table appended to
    /// `$GITHUB_STEP_SUMMARY` when that is set.
    func print(_ result: Result) throws {
        let printout = try result.rendered(as: report)
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
