/// Failures that map onto the documented exit statuses (spec/cli.md).
public enum FPError: Error, CustomStringConvertible, Sendable {
    /// 65: the data (bundle, cache, flow) is invalid; each finding is one line.
    case invalid([Finding])
    /// 66: an input file or directory does not exist.
    case inputMissing(String)
    /// 73: the output cannot be written.
    case cannotWrite(String)
    /// 64: arguments that parse but do not make sense together.
    case usage(String)

    public var description: String {
        switch self {
        case .invalid(let findings): findings.filter { $0.severity == .error }.map(\.line).joined(separator: "\n")
        case .inputMissing(let m), .cannotWrite(let m), .usage(let m): m
        }
    }

    public var exitCode: Int32 {
        switch self {
        case .invalid: 65
        case .inputMissing: 66
        case .cannotWrite: 73
        case .usage: 64
        }
    }
}
