import FlowPilotCore
import Foundation

/// `--format` of the commands whose result is findings (`bundle build`,
/// `bundle validate`, `bundle diff`): the command's own text, JSON (and, for
/// diff, CSV), or a format CI shows findings in (`FindingsFormat`).
public enum ReportFormat: Equatable, Sendable {
    case plain(OutputFormat)
    case findings(FindingsFormat)

    /// `text` (or `table`), `json`, `csv`, `sarif`, `github`, `junit` or `gitlab`.
    public init?(name: String) {
        if let f = FindingsFormat(rawValue: name) {
            self = .findings(f)
        } else if let p = OutputFormat(name: name) {
            self = .plain(p)
        } else {
            return nil
        }
    }

    /// The names a result with these plain formats takes, as the help lists them.
    public static func names(plain formats: [OutputFormat]) -> [String] {
        formats.map(\.rawValue) + FindingsFormat.allCases.map(\.rawValue)
    }

    /// Its name as `--format` takes it (`text` for text, which also takes `table`).
    public var name: String {
        switch self {
        case .plain(let format): format.rawValue
        case .findings(let format): format.rawValue
        }
    }
}

/// A line for standard error that a result prints with its text or CSV
/// (never with JSON or a CI format, whose reader takes standard output whole).
public enum Diagnostic: Equatable, Sendable {
    /// A finding's text line, as it is (`FindingsReport.textLine`).
    case finding(String)
    /// `fpctl: error: MESSAGE`: a target that could not be checked at all.
    case error(String)
}

/// A command result that is findings (`bundle build`, `bundle validate`,
/// `bundle diff`): besides its own text, JSON and CSV (`Rendering`), the
/// findings for the CI formats and the lines its text puts on standard
/// error. `rendered(as:)` is the one path every `--format` of these
/// commands takes; the executable declares the option once, from `formats`,
/// and only writes what comes back.
public protocol FindingsRendering: Rendering, SendableMetatype {
    /// `bundle validate`, say: error messages, the JUnit suite and the step summary's title.
    static var command: String { get }
    /// The findings, for sarif, github, junit and gitlab.
    var findingsReport: FindingsReport { get }
    /// With text or CSV: standard error's lines before standard output's.
    var leadingDiagnostics: [Diagnostic] { get }
    /// With text or CSV: standard error's lines after standard output's.
    var trailingDiagnostics: [Diagnostic] { get }
}

/// What a findings result prints in one format: standard output's text and,
/// around it, standard error's lines.
public struct Printout: Equatable, Sendable {
    public var before: [Diagnostic] = []
    public var output: String
    public var after: [Diagnostic] = []
    /// The CI format, when it was one (`github` also writes a step summary).
    public var format: FindingsFormat?
}

extension FindingsRendering {
    public var leadingDiagnostics: [Diagnostic] { [] }
    public var trailingDiagnostics: [Diagnostic] { [] }

    /// The result as `format` prints it.
    public func rendered(as format: ReportFormat) throws -> Printout {
        switch format {
        case .plain(let plain):
            let text = try rendered(as: plain)
            if plain == .json { return Printout(output: text) }
            return Printout(before: leadingDiagnostics, output: text, after: trailingDiagnostics)
        case .findings(let f):
            return Printout(output: findingsReport.rendered(as: f), format: f)
        }
    }

    /// Its plain formats and every CI format.
    public static var reportFormats: [ReportFormat] {
        formats.map { .plain($0) } + FindingsFormat.allCases.map { .findings($0) }
    }

    /// What is wrong with `format` for this result, for a usage error
    /// before any work is done (`--format csv` where there is no table); nil: nothing.
    public static func unsupported(_ format: ReportFormat) -> String? {
        guard case .plain(let p) = format, !formats.contains(p) else { return nil }
        return "--format \(p.rawValue): \(command) prints "
            + ReportFormat.names(plain: formats).joined(separator: ", ")
    }
}

extension FindingsReport.Target {
    /// Each finding's text line (`FindingsReport.textLine`), at most
    /// `Array.shownPerRuleAndFile` of a rule in a file.
    func textLines(command: String, workingDirectory: String) -> [String] {
        FindingsReport(command: command, targets: [bounded], workingDirectory: workingDirectory).located.map(
            FindingsReport.textLine)
    }
}

/// `bundle build`: the findings of the source and, when it was valid, the
/// bundle written. Text puts the findings on standard error as a compiler
/// does and `DIGEST  PATH` on standard output.
public struct BuildReport: FindingsRendering {
    public struct Document: Encodable {
        let source: String
        let valid: Bool
        let findings: [Finding]
        let digest: String?
        let output: String?
    }

    public static let command = "bundle build"
    public static var formats: [OutputFormat] { [.text, .json] }

    public let document: Document
    let target: FindingsReport.Target
    let workingDirectory: String

    /// `findings`: the check's, as `--strict` made them; `built`: the bundle
    /// written, nil when none was.
    public init(
        check: BundleBuilder.SourceCheck, findings: [Finding], built: BundleBuilder.Result?, workingDirectory: String
    ) {
        document = Document(
            source: check.directory, valid: !findings.hasErrors, findings: findings, digest: built?.digest,
            output: built?.output)
        target = FindingsReport.Target(
            path: check.directory, kind: .source, findings: findings, cases: check.checkedFiles,
            files: check.presentFiles)
        self.workingDirectory = workingDirectory
    }

    public func text() -> String {
        guard let digest = document.digest, let output = document.output else { return "" }
        return "\(digest)  \(output)\n"
    }

    public var leadingDiagnostics: [Diagnostic] {
        target.textLines(command: Self.command, workingDirectory: workingDirectory).map(Diagnostic.finding)
    }

    public var findingsReport: FindingsReport {
        FindingsReport(command: Self.command, targets: [target], workingDirectory: workingDirectory)
    }
}
