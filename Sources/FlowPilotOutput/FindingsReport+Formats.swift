import FlowPilotCore
import Foundation

/// The formats a findings report renders in besides a command's own text,
/// JSON and CSV.
public enum FindingsFormat: String, Sendable, CaseIterable {
    case sarif, github, junit, gitlab
}

extension FindingsReport {
    public func rendered(as format: FindingsFormat) -> String {
        switch format {
        case .sarif: String(decoding: sarif(), as: UTF8.self)
        case .github: github()
        case .junit: junit()
        case .gitlab: String(decoding: gitlab(), as: UTF8.self)
        }
    }

    // MARK: SARIF

    /// GitHub code scanning takes at most this many results a run.
    public static let sarifResultLimit = 25_000

    /// SARIF 2.1.0 as GitHub code scanning ingests it: the driver with every
    /// rule fpctl has (help from fpctl-bundle(5)), each result with a rule,
    /// a level, a message, a location (never none, never an absolute or empty
    /// URI) and a partial fingerprint. Past `limit` results the rest are left
    /// out and counted in a tool notification.
    public func sarif(limit: Int = sarifResultLimit) -> Data {
        var rules = Rule.all
        for l in located
        where Rule.named(l.finding.rule) == nil && !rules.contains(where: { $0.id.sameBytes(as: l.finding.rule) }) {
            rules.append(Rule.unknown(l.finding.rule))
        }
        let ruleIndex = Dictionary(uniqueKeysWithValues: rules.enumerated().map { ($1.id, $0) })
        let driver: [ExactName: JSONValue] = [
            "name": "fpctl",
            "version": .string(FPVersion.current),
            "semanticVersion": .string(FPVersion.current),
            "informationUri": .string(Rule.manual),
            "rules": .array(rules.map(Self.sarifRule)),
        ]
        let kept = located.prefix(limit)
        let results: [JSONValue] = kept.map { l in
            var location: [ExactName: JSONValue] = [
                "physicalLocation": .object([
                    "artifactLocation": .object(["uri": .string(Self.uriEncoded(l.file))]),
                    "region": .object(
                        l.position.map {
                            ["startLine": .number(Double($0.line)), "startColumn": .number(Double($0.column))]
                        } ?? ["startLine": 1]),
                ])
            ]
            if let logical = l.logical {
                location["logicalLocations"] = .array([
                    .object(["fullyQualifiedName": .string(logical), "kind": "element"])
                ])
            }
            return .object([
                "ruleId": .string(l.finding.rule),
                "ruleIndex": .number(Double(ruleIndex[l.finding.rule] ?? 0)),
                "level": .string(l.finding.severity == .error ? "error" : "warning"),
                "message": .object(["text": .string(l.finding.message)]),
                "locations": .array([.object(location)]),
                "partialFingerprints": .object(["fpctl/v1": .string(l.fingerprint)]),
            ])
        }
        var invocation: [ExactName: JSONValue] = ["executionSuccessful": .bool(targets.allSatisfy { $0.error == nil })]
        var notifications: [JSONValue] = []
        if located.count > kept.count {
            notifications.append(
                .object([
                    "level": "warning",
                    "descriptor": .object(["id": "results-left-out"]),
                    "message": .object([
                        "text": .string(
                            "\(located.count - kept.count) of \(located.count) results left out: GitHub code scanning takes at most \(limit) a run"
                        )
                    ]),
                ]))
        }
        for target in targets {
            guard let error = target.error else { continue }
            notifications.append(.object(["level": "error", "message": .object(["text": .string(error)])]))
        }
        if !notifications.isEmpty { invocation["toolExecutionNotifications"] = .array(notifications) }
        let run: [ExactName: JSONValue] = [
            "tool": .object(["driver": .object(driver)]),
            "columnKind": "unicodeCodePoints",
            "invocations": .array([.object(invocation)]),
            "results": .array(results),
        ]
        return JSONDocument.foreign(
            .object([
                "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
                "version": "2.1.0",
                "runs": .array([.object(run)]),
            ]))
    }

    private static func sarifRule(_ rule: Rule) -> JSONValue {
        .object([
            "id": .string(rule.id),
            "name": .string(rule.id),
            "shortDescription": .object(["text": .string(rule.summary)]),
            "fullDescription": .object(["text": .string(rule.summary + ". " + rule.help)]),
            "help": .object([
                "text": .string(rule.help),
                "markdown": .string("**\(rule.id)**: \(rule.summary). \(rule.help) See `man fpctl-bundle`, RULES."),
            ]),
            "helpUri": .string(Rule.manual),
            "defaultConfiguration": .object(["level": .string(rule.level == .error ? "error" : "warning")]),
        ])
    }

    /// A relative URI reference for a path: unreserved characters and `/`
    /// as they are, everything else percent-encoded (a space, `#`, `%`, non-ASCII).
    static func uriEncoded(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            let c = Character(Unicode.Scalar(byte))
            if byte < 0x80, c.isLetter || c.isNumber || "-._~/".contains(c) {
                out.append(c)
            } else {
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    // MARK: GitHub

    /// GitHub shows at most this many annotations of a kind per step.
    public static let githubAnnotationsPerKind = 10

    /// Workflow commands: `::error file=…,line=…,col=…,title=RULE::message`
    /// (`::warning` for warnings) for the first `perKind` of each kind, the
    /// rest as plain `FILE:LINE:COL: error: RULE: message` lines, and a last line
    /// that counts them.
    public func github(perKind: Int = githubAnnotationsPerKind) -> String {
        var out = ""
        var shown: [Finding.Severity: Int] = [:]
        for l in located {
            let kind = l.finding.severity
            let n = shown[kind, default: 0]
            shown[kind] = n + 1
            if n < perKind {
                var properties = ["file=" + Self.githubProperty(l.file)]
                if let p = l.position { properties += ["line=\(p.line)", "col=\(p.column)"] }
                properties.append("title=" + Self.githubProperty(l.finding.rule))
                let message = Self.githubData(
                    l.kind == .bundle && l.logical != nil
                        ? "\(l.logical ?? ""): \(l.finding.message)" : l.finding.message)
                out += "::\(kind == .error ? "error" : "warning") \(properties.joined(separator: ","))::\(message)\n"
            } else {
                out += Self.textLine(l) + "\n"
            }
        }
        for target in targets { if let error = target.error { out += "::error::\(Self.githubData(error))\n" } }
        out += "fpctl: \(summaryCounts)"
        let cut = located.count - min(shown[.error, default: 0], perKind) - min(shown[.warning, default: 0], perKind)
        if cut > 0 {
            out +=
                "; the first \(perKind) of each kind are annotations (GitHub shows no more), \(cut) are log lines above"
        }
        return out + "\n"
    }

    /// `3 errors, 1 warning`.
    var summaryCounts: String {
        func n(_ count: Int, _ word: String) -> String { "\(count) \(word)\(count == 1 ? "" : "s")" }
        return n(errorCount, "error") + ", " + n(warningCount, "warning")
    }

    /// A workflow command's message: `%`, CR and LF escaped.
    static func githubData(_ text: String) -> String {
        text.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "\r", with: "%0D")
            .replacingOccurrences(of: "\n", with: "%0A")
    }

    /// A workflow command's property value: also `:` and `,`.
    static func githubProperty(_ text: String) -> String {
        githubData(text).replacingOccurrences(of: ":", with: "%3A").replacingOccurrences(of: ",", with: "%2C")
    }

    /// A Markdown table of findings per rule and file, for `GITHUB_STEP_SUMMARY`.
    public func stepSummary() -> String {
        var out = "### fpctl \(command)\n\n"
        guard !located.isEmpty else { return out + "No findings.\n\n" }
        out += "\(summaryCounts).\n\n| rule | file | errors | warnings |\n|---|---|---:|---:|\n"
        var rows: [String: (rule: String, file: String, errors: Int, warnings: Int)] = [:]
        var order: [String] = []
        for l in located {
            let key = l.finding.rule + "\u{0}" + l.file
            if rows[key] == nil {
                rows[key] = (l.finding.rule, l.file, 0, 0)
                order.append(key)
            }
            if l.finding.severity == .error { rows[key]?.errors += 1 } else { rows[key]?.warnings += 1 }
        }
        for key in order {
            guard let r = rows[key] else { continue }
            out += "| `\(r.rule)` | \(Self.markdownCell(r.file)) | \(r.errors) | \(r.warnings) |\n"
        }
        return out + "\n"
    }

    static func markdownCell(_ text: String) -> String {
        Printable.escaped(text).replacingOccurrences(of: "|", with: "\\|")
    }

    // MARK: JUnit

    /// JUnit XML as Jenkins, GitLab and GitHub test reporters read it, as
    /// ruff's and ESLint's reporters write it: a suite per target, a test case
    /// per finding (classname its file, name its rule and where in the file:
    /// the JSON pointer, or the entry and pointer inside a bundle), failing
    /// for an error, passing with the line in `system-out` for a warning; and
    /// a passing test case per file checked (or placement compared) that has
    /// no finding, so a clean run shows what was checked. Names are stable
    /// from run to run: a pointer, never a line, and `#2` for a second
    /// identical one.
    public func junit() -> String {
        var suites = ""
        var totalTests = 0
        var totalFailures = 0
        for (t, target) in targets.enumerated() {
            let name = FindingsReport.relative(target.path, to: workingDirectory)
            let found = located.filter { $0.target == t }
            let known = Set(target.cases)
            let withFindings = Set(found.compactMap { target.testCase($0.finding, known: known) })
            var cases = ""
            var tests = 0
            var failures = 0
            var seen: [String: Int] = [:]
            for l in found {
                let key = l.file + "\u{0}" + Self.where(l)
                seen[key, default: 0] += 1
                let n = seen[key] ?? 1
                let caseName = Self.where(l) + (n > 1 ? " #\(n)" : "")
                tests += 1
                cases += "    <testcase classname=\"\(Self.xml(l.file))\" name=\"\(Self.xml(caseName))\">\n"
                if l.finding.severity == .error {
                    failures += 1
                    cases +=
                        "      <failure type=\"\(Self.xml(l.finding.rule))\" message=\"\(Self.xml(l.finding.message))\">"
                        + Self.xml(Self.textLine(l)) + "</failure>\n"
                } else {
                    cases += "      <system-out>" + Self.xml(Self.textLine(l)) + "</system-out>\n"
                }
                cases += "    </testcase>\n"
            }
            for c in target.cases where !withFindings.contains(c) {
                tests += 1
                // A source's file is its own class; a bundle's entry or a placement is a case of the target's.
                let (classname, caseName) =
                    target.kind == .source && target.files.contains(c) ? (Self.join(name, c), "no findings") : (name, c)
                cases += "    <testcase classname=\"\(Self.xml(classname))\" name=\"\(Self.xml(caseName))\"/>\n"
            }
            if let error = target.error {
                tests += 1
                failures += 1
                cases +=
                    "    <testcase classname=\"\(Self.xml(name))\" name=\"read\"><error message=\"\(Self.xml(error))\"/></testcase>\n"
            }
            totalTests += tests
            totalFailures += failures
            suites +=
                "  <testsuite name=\"\(Self.xml(name))\" tests=\"\(tests)\" failures=\"\(failures)\" errors=\"0\" skipped=\"0\">\n"
                + cases + "  </testsuite>\n"
        }
        return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            + "<testsuites name=\"fpctl \(Self.xml(command))\" tests=\"\(totalTests)\" failures=\"\(totalFailures)\">\n"
            + suites + "</testsuites>\n"
    }

    /// A finding's JUnit case name: its rule and where in its file (`RULE at
    /// /screens/0/id`; inside a bundle, `RULE at ENTRY#POINTER`).
    static func `where`(_ l: Located) -> String {
        guard let logical = l.logical, !logical.isEmpty else { return l.finding.rule }
        return "\(l.finding.rule) at \(logical)"
    }

    /// Text and attribute values for XML 1.0: the five markup characters as
    /// entities, and the control characters XML cannot carry at all shown as
    /// `Printable` escapes.
    static func xml(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\n": out += "&#10;"
            case "\t": out += "&#9;"
            default:
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0xFFFE
                    || scalar.value == 0xFFFF
                {
                    out += Printable.escaped(String(scalar))
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    // MARK: GitLab

    /// GitLab Code Quality: a JSON array, each finding with `description`,
    /// `check_name`, `fingerprint`, `severity` (errors `major`, warnings
    /// `minor`) and `location.path` / `location.lines.begin` (1 when the
    /// finding is about a whole file).
    public func gitlab() -> Data {
        JSONDocument.foreign(
            .array(
                located.map { l in
                    let description =
                        l.kind == .bundle && l.logical != nil
                        ? "\(l.logical ?? ""): \(l.finding.message)" : l.finding.message
                    return .object([
                        "description": .string(description),
                        "check_name": .string(l.finding.rule),
                        "fingerprint": .string(l.fingerprint),
                        "severity": .string(l.finding.severity == .error ? "major" : "minor"),
                        "location": .object([
                            "path": .string(l.file),
                            "lines": .object(["begin": .integer(Int64(l.position?.line ?? 1))]),
                        ]),
                    ])
                }))
    }
}

extension Rule {
    /// A rule id the catalogue lacks, described by its id (never expected:
    /// a test keeps the catalogue whole; SARIF would still need a rule for it).
    static func unknown(_ id: String) -> Rule {
        Rule(id, .error, id, "See fpctl-bundle(5), RULES.")
    }
}
