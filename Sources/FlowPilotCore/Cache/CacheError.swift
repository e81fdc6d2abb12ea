/// Cache failures that are not findings: I/O and format refusals.
public enum CacheError: Error, CustomStringConvertible, Sendable {
    case io(String)
    case missing(String)
    case newerFormat(String)
    case notACache(String)

    public var description: String {
        switch self {
        case .io(let m), .missing(let m), .newerFormat(let m), .notACache(let m): m
        }
    }

    public var asFPError: FPError {
        switch self {
        case .missing(let m): .inputMissing(m)
        case .newerFormat(let m), .notACache(let m): .invalid([.error("cache-format", "", m)])
        case .io(let m): .cannotWrite(m)
        }
    }
}
