/// Failures that map onto the documented exit statuses (`ExitStatus`).
public enum FPError: Error, CustomStringConvertible, Sendable {
    /// `invalidData`: the data (bundle, cache, flow) is invalid; each finding is one line.
    case invalid([Finding])
    /// `inputMissing`: an input file or directory does not exist.
    case inputMissing(String)
    /// `cannotWrite`: the output cannot be written.
    case cannotWrite(String)
    /// `usage`: arguments that parse but do not make sense together.
    case usage(String)
    /// `unavailable`: no request reached the backend (unreachable, TLS, proxy).
    case unavailable(String)

    public var description: String {
        switch self {
        case .invalid(let findings):
            findings.filter { $0.severity == .error }.bounded().map(\.line).joined(separator: "\n")
        case .inputMissing(let m), .cannotWrite(let m), .usage(let m), .unavailable(let m): m
        }
    }

    public var exitStatus: ExitStatus {
        switch self {
        case .invalid: .invalidData
        case .inputMissing: .inputMissing
        case .cannotWrite: .cannotWrite
        case .usage: .usage
        case .unavailable: .unavailable
        }
    }
}
