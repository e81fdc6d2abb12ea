import Foundation

/// One thing a validator found: which rule, where, and what is wrong.
/// Its own line (`line`) is `RULE: PATH: MESSAGE`, `warning: ` before a
/// warning's; beside its file, as commands print it, see
/// `FindingsReport.textLine` (docs/ci.md).
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
    /// Line and column (from 1; the column in Unicode scalars) of the value
    /// `path` names in the file a person edits: set for a source directory's
    /// flows and bundle.json, nil inside a bundle.
    public var position: SourcePosition?

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

    /// The JSON pointer part of `path` (after `#`), empty when it names a whole file.
    public var pointer: Substring {
        guard let hash = path.firstIndex(of: "#") else { return "" }
        return path[path.index(after: hash)...]
    }

    /// `rule-id: path: message`, with `warning: ` in front of warnings.
    public var line: String { (severity == .warning ? "warning: " : "") + body }

    /// `rule-id: path: message`, for callers that say the severity themselves.
    public var body: String { "\(rule): \(path.isEmpty ? "-" : path): \(message)" }
}

extension Finding {
    enum CodingKeys: String, CodingKey { case severity, rule, path, message, line, column }

    /// JSON output has the position as `line` and `column`, when known.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(severity, forKey: .severity)
        try c.encode(rule, forKey: .rule)
        try c.encode(path, forKey: .path)
        try c.encode(message, forKey: .message)
        try c.encodeIfPresent(position?.line, forKey: .line)
        try c.encodeIfPresent(position?.column, forKey: .column)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            try c.decode(Severity.self, forKey: .severity), rule: try c.decode(String.self, forKey: .rule),
            path: try c.decode(String.self, forKey: .path), message: try c.decode(String.self, forKey: .message))
        if let line = try c.decodeIfPresent(Int.self, forKey: .line) {
            position = .init(line: line, column: try c.decodeIfPresent(Int.self, forKey: .column) ?? 1)
        }
    }
}

extension Array where Element == Finding {
    public var hasErrors: Bool { contains { $0.severity == .error } }

    /// Every finding an error: what `--strict` makes of warnings.
    public var strict: [Finding] {
        map {
            var f = $0
            f.severity = .error
            return f
        }
    }
}

extension Finding {
    /// `bundle-age` at `at` (a `created_at` pointer) when `createdAt` is older
    /// than `maxAge` at `now`; nil when it is not, or no age is asked for.
    public static func bundleAge(
        _ severity: Severity, at: String, createdAt: Date, maxAge: TimeInterval?, now: Date, advice: String = ""
    ) -> Finding? {
        guard let maxAge, now.timeIntervalSince(createdAt) > maxAge else { return nil }
        return Finding(
            severity, rule: "bundle-age", path: at,
            message: "created \(RFC3339.string(createdAt)), older than the allowed \(Int(maxAge))s\(advice)")
    }
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
    public var file: Substring { path.prefix { $0 != "#" } }
}

/// Where in a text a finding points: line and column, both from 1; the column
/// counts Unicode scalars. What an editor opens (`JSONPositions` records them).
public struct SourcePosition: Sendable, Equatable, Hashable, Codable {
    public let line: Int
    public let column: Int
    public init(line: Int, column: Int) { (self.line, self.column) = (line, column) }
}
