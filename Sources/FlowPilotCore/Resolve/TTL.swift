/// How long a flow stays fresh, in whole seconds: the one rule for a TTL from
/// the backend (`cache_ttl_seconds`), from `cache put` (`ttl_seconds`) and for
/// `serve --ttl`. From 0 (stale at once) to 2,147,483,647 (68 years): a TTL is
/// written into entry names and files and compared with ages as a Double, and
/// this range survives both exactly. A fraction is dropped (1.9 is 1).
public enum TTL {
    public static let range: ClosedRange<Int> = 0...Int(Int32.max)

    /// The TTL a JSON number gives, or nil when it is out of range (negative,
    /// too large, not finite), which makes the response or line invalid.
    public static func seconds(_ value: Double) -> Int? {
        guard value.isFinite, value >= 0, value < Double(range.upperBound) + 1 else { return nil }
        return Int(value)
    }

    /// What a person or a log is told of a TTL that is out of range.
    public static func outOfRange(_ field: String, _ value: JSONValue) -> String {
        "\(field) \(CanonicalJSON.string(value)) is out of range (\(range.lowerBound) to \(range.upperBound) seconds)"
    }

    /// The TTL a JSON member gives: nil when it is absent or null (the
    /// default applies), else its seconds, or the one-line reason it is
    /// invalid: not a number (`"86400"`, `true`), or out of range. A TTL of
    /// the wrong type is never taken for the default.
    public static func read(_ value: JSONValue?, field: String) -> Result<Int?, TTLProblem> {
        guard let value, value != .null else { return .success(nil) }
        guard let number = value.numberValue else {
            return .failure(TTLProblem(message: "\(field) must be a number of seconds, found \(value.typeName)"))
        }
        guard let seconds = seconds(number) else { return .failure(TTLProblem(message: outOfRange(field, value))) }
        return .success(seconds)
    }
}

/// Why a TTL in a response or an input line is invalid.
public struct TTLProblem: Error, Sendable {
    public let message: String
}
