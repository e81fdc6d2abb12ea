/// The kinds of failure the library reports, each with what a person needs to
/// read. A caller decides what each means to it (the fpctl executable maps
/// them to its exit statuses, and adds the hints that name its flags).
public enum FPError: Error, CustomStringConvertible, Sendable {
    /// The data (bundle, cache, flow) is invalid; each finding is one line.
    case invalid([Finding])
    /// An input file or directory does not exist or cannot be read.
    case inputMissing(String)
    /// The output cannot be written.
    case cannotWrite(String)
    /// The output file exists and the caller did not ask to replace it; the path.
    case outputExists(String)
    /// The directory to extract into has files and the caller did not ask to add to it; the path.
    case directoryNotEmpty(String)
    /// Arguments that parse but do not make sense together.
    case usage(String)
    /// No request reached the backend (unreachable, TLS, proxy: `BackendReach`).
    case unavailable(String)
    /// Anything else that stopped the work (a port that cannot be listened on).
    case failed(String)

    public var description: String {
        switch self {
        case .invalid(let findings):
            findings.filter { $0.severity == .error }.bounded().map(\.line).joined(separator: "\n")
        case .inputMissing(let m), .cannotWrite(let m), .usage(let m), .unavailable(let m), .failed(let m): m
        case .outputExists(let path): "\(path): already exists"
        case .directoryNotEmpty(let path): "\(path): not empty"
        }
    }
}
