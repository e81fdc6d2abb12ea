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
