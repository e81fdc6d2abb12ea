import FlowPilotCore
import Foundation

/// The findings of `bundle build`, `bundle validate` or `bundle diff`, over
/// one or more checked targets (a bundle, a source directory), rendered for
/// the places CI shows them: SARIF 2.1.0 (GitHub code scanning), GitHub
/// workflow commands, JUnit XML and GitLab Code Quality. One model, one
/// renderer per format (`FindingsFormat`); the exit status never depends on
/// the format.
///
/// Every finding is located at a file relative to the working directory (the
/// repository root in CI): a source directory's file, with the line and
/// column of the value it names, or the bundle file itself, with the entry
/// and JSON pointer as a logical location.
public struct FindingsReport: Sendable {
    public struct Target: Sendable {
        public enum Kind: Sendable { case bundle, source }
        /// The bundle file or source directory, as the command was given it.
        public let path: String
        public let kind: Kind
        public let findings: [Finding]
        /// What was checked: a source's files, a bundle's entries, or the
        /// placements compared; JUnit gives each one without a finding a passing case.
        public let cases: [String]
        /// Why the target could not be checked at all, when it could not.
        public let error: String?
        /// A source's regular files that findings may be placed at, relative
        /// to `path` (`BundleBuilder.SourceCheck.presentFiles`); a finding
        /// about another file is placed at bundle.json. The report reads no file.
        public let files: Set<String>
        /// Which of `cases` a finding is about (a placement, for diff); nil:
        /// its file, when that is one of them.
        let caseOf: (@Sendable (Finding) -> String)?

        public init(
            path: String, kind: Kind, findings: [Finding], cases: [String], files: Set<String> = [],
            error: String? = nil, caseOf: (@Sendable (Finding) -> String)? = nil
        ) {
            (self.path, self.kind, self.findings, self.cases, self.error) = (path, kind, findings, cases, error)
            (self.files, self.caseOf) = (files, caseOf)
        }

        /// The same target with at most `Array.shownPerRuleAndFile` findings
        /// of a rule in a file, then `… and N more`: what text prints.
        public var bounded: Target {
            Target(
                path: path, kind: kind, findings: findings.bounded(), cases: cases, files: files, error: error,
                caseOf: caseOf)
        }

        /// The checked file or placement (one of `known`) a finding is about,
        /// or nil: `caseOf`'s, else its file's.
        func testCase(_ f: Finding, known: Set<String>) -> String? {
            if let caseOf { return caseOf(f) }
            let file = String(f.file)
            return known.contains(file) ? file : nil
        }
    }

    /// A finding where CI shows it.
    public struct Located: Sendable {
        public let finding: Finding
        public let target: Int
        public let kind: Target.Kind
        /// Relative to the working directory, `/` between components.
        public let file: String
        /// The file as a person named it: the bundle or source directory as
        /// the command was given it, joined with the file in the source.
        public let shown: String
        public let position: JSONPositions.Position?
        /// The entry and JSON pointer inside a bundle, or the pointer inside a source file.
        public let logical: String?
        /// Stable while unrelated lines move: rule, file, logical location and
        /// the count of identical ones before it; never the line.
        public let fingerprint: String
    }

    /// `bundle validate`, say: the JUnit suite's and the step summary's title.
    public let command: String
    public let targets: [Target]
    public let located: [Located]
    /// What paths are shown relative to: the repository root in CI, the
    /// process's working directory as the executable passes it.
    public let workingDirectory: String

    public init(command: String, targets: [Target], workingDirectory: String) {
        self.command = command
        self.targets = targets
        let cwd = workingDirectory
        self.workingDirectory = cwd
        var seen: [String: Int] = [:]
        var located: [Located] = []
        for (t, target) in targets.enumerated() {
            let base = Self.relative(target.path, to: cwd)
            for f in target.findings {
                let file: String
                let shown: String
                let logical: String?
                var exists = false
                switch target.kind {
                case .bundle:
                    file = base
                    shown = target.path
                    logical = f.path.isEmpty || f.path == "-" ? nil : f.path
                case .source:
                    exists = target.files.contains(String(f.file))
                    // A finding about no file of the source (a limit on the
                    // whole bundle) or a file it lacks is about its bundle.json.
                    let name = exists ? String(f.file) : BundleSource.fileName
                    file = Self.join(base, name)
                    shown = (target.path.hasSuffix("/") ? target.path : target.path + "/") + name
                    logical = f.pointer.isEmpty ? nil : String(f.pointer)
                }
                let key = [f.rule, file, logical ?? ""].joined(separator: "\u{0}")
                let n = seen[key, default: 0]
                seen[key] = n + 1
                let fingerprint = String(Digest.sha256Hex(Data((key + "\u{0}\(n)").utf8)).prefix(32))
                located.append(
                    Located(
                        finding: f, target: t, kind: target.kind, file: file, shown: shown,
                        position: target.kind == .source && exists ? f.position : nil,
                        logical: logical, fingerprint: fingerprint))
            }
        }
        self.located = located
    }

    public var errorCount: Int { located.count { $0.finding.severity == .error } }
    public var warningCount: Int { located.count { $0.finding.severity == .warning } }

    // MARK: Paths

    /// `path` relative to `cwd`, with `/` between components, never absolute
    /// and never empty (`.` for the directory itself).
    static func relative(_ path: String, to cwd: String) -> String {
        let absolute = path.hasPrefix("/") ? path : cwd + "/" + path
        let parts = normalized(absolute)
        let base = normalized(cwd)
        var common = 0
        while common < min(parts.count, base.count), parts[common] == base[common] { common += 1 }
        let up = Array(repeating: "..", count: base.count - common)
        let rest = up + parts[common...]
        return rest.isEmpty ? "." : rest.joined(separator: "/")
    }

    /// The components of an absolute path, `.` and `..` resolved as text.
    private static func normalized(_ path: String) -> [String] {
        var out: [String] = []
        for part in path.split(separator: "/") where part != "." {
            if part == ".." {
                if !out.isEmpty { out.removeLast() }
            } else {
                out.append(String(part))
            }
        }
        return out
    }

    static func join(_ base: String, _ name: String) -> String {
        base == "." ? name : base + "/" + name
    }

    // MARK: Text

    /// `FILE:LINE:COL: error: RULE: message` (or `warning:`), the form
    /// compilers print and editors, terminals, Xcode and `swift build` show
    /// at the line; a whole file's `FILE: error: RULE: message`; inside a
    /// bundle, `FILE: RULE: ENTRY#POINTER: message` (warnings `FILE: warning: …`).
    public static func textLine(_ l: Located) -> String {
        let f = l.finding
        let message = Printable.escaped(f.message)
        let file = Printable.escaped(l.shown)
        if l.kind == .source {
            let severity = f.severity == .warning ? "warning: " : "error: "
            let at = l.position.map { "\(file):\($0.line):\($0.column)" } ?? file
            return "\(at): \(severity)\(f.rule): \(message)"
        }
        let severity = f.severity == .warning ? "warning: " : ""
        if l.kind == .bundle {
            return "\(file): \(severity)\(f.rule): \(Printable.escaped(l.logical ?? "-")): \(message)"
        }
        return "\(file): \(severity)\(f.rule): \(message)"
    }
}
