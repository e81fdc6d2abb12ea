/// One thing a validator found: which rule, where, and what is wrong.
/// Rendered as `file: rule-id: path: message`.
public struct Finding: Sendable, Equatable, Codable {
    public enum Severity: String, Sendable, Codable {
        case error
        case warning
    }

    public var severity: Severity
    /// Stable identifier of the rule, e.g. `zip-path-traversal` or `flow-navigate`.
    public var rule: String
    /// Where: an archive path, optionally followed by a JSON path (`flows/a.json#/screens/0`).
    public var path: String
    public var message: String

    public init(_ severity: Severity = .error, rule: String, path: String, message: String) {
        self.severity = severity
        self.rule = rule
        self.path = path
        self.message = message
    }

    public static func error(_ rule: String, _ path: String, _ message: String) -> Finding {
        Finding(.error, rule: rule, path: path, message: message)
    }

    public static func warning(_ rule: String, _ path: String, _ message: String) -> Finding {
        Finding(.warning, rule: rule, path: path, message: message)
    }

    /// `rule-id: path: message`, with `warning: ` in front of warnings.
    public var line: String { (severity == .warning ? "warning: " : "") + body }

    /// `rule-id: path: message`, for callers that say the severity themselves.
    public var body: String { "\(rule): \(path.isEmpty ? "-" : path): \(message)" }
}

extension Array where Element == Finding {
    public var hasErrors: Bool { contains { $0.severity == .error } }
}

extension Array where Element == Finding {
    /// How many findings of one rule in one file are shown before the rest are counted.
    public static var shownPerRuleAndFile: Int { 20 }

    /// The findings a person reads: the first `limit` of each rule in each file
    /// (the part of `path` before `#`), in their order, and for a group cut short
    /// one more in its place, `… and 14,980 more`. A flow with 15,000 duplicate
    /// screen ids is 21 lines, not 15,000; JSON output carries them all.
    public func bounded(perRuleAndFile limit: Int = shownPerRuleAndFile) -> [Finding] {
        var counts: [FindingGroup: Int] = [:]
        for f in self { counts[FindingGroup(rule: f.rule, file: f.file), default: 0] += 1 }
        var seen: [FindingGroup: Int] = [:]
        var out: [Finding] = []
        for f in self {
            let group = FindingGroup(rule: f.rule, file: f.file)
            let n = seen[group, default: 0] + 1
            seen[group] = n
            if n <= limit {
                out.append(f)
            } else if n == limit + 1, let total = counts[group] {
                out.append(
                    Finding(
                        f.severity, rule: f.rule, path: String(f.file),
                        message: "… and \(Self.grouped(total - limit)) more"))
            }
        }
        return out
    }

    /// 14980 as `14,980`, the same in every locale.
    static func grouped(_ n: Int) -> String {
        let digits = [Character](n.description)
        var out = ""
        for (i, d) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(d)
        }
        return out
    }
}

/// Findings of one rule in one file.
struct FindingGroup: Hashable {
    let rule: String
    let file: Substring
}

extension Finding {
    /// The file a finding is in: its path up to a `#` JSON pointer.
    var file: Substring { path.prefix { $0 != "#" } }
}
