import ArgumentParser
import FlowPilotCore
import Foundation

// Options with a fixed set of values or a unit parse into the core's own types
// here, so `--help`, the completions and the man pages list the values, and a
// bad value is a usage error (64) before anything is touched. The conformances
// live in the executable so the core never imports the argument parser.

// Each enum describes its values, so help and man pages list them with their meaning.

extension MediaStrategy: ExpressibleByArgument {
    public static var allValueDescriptions: [String: String] {
        [
            "none": "Flow JSON and fonts only.",
            "first-screen": "Also the images of the first screen and the persistent zones.",
            "all-screens": "Also the images of every screen.",
        ]
    }
}

extension SDKEnvironment: ExpressibleByArgument {
    public static var allValueDescriptions: [String: String] {
        Dictionary(uniqueKeysWithValues: allCases.map { ($0.rawValue, "Default TTL \($0.defaultTTL) s.") })
    }
}

extension WarmRun.FailOn: ExpressibleByArgument {
    public static var allValueDescriptions: [String: String] {
        [
            "failed": "Exit 3 when any placement failed.",
            "no-flow": "Exit 3 when any placement failed or had no flow.",
            "never": "Exit 0 whatever the outcomes (69 still applies).",
        ]
    }
}

/// A duration such as `90s`, `500ms`, `60d` or `1h30m` (units ms s m h d w).
struct DurationArgument: ExpressibleByArgument, CustomStringConvertible {
    let text: String
    let seconds: Double

    init?(argument: String) {
        // A negative duration parses, so that `check` can say the range.
        guard let seconds = Units.parseSignedDuration(argument) else { return nil }
        (self.text, self.seconds) = (argument, seconds)
    }

    /// A default value, written as the help shows it.
    init(_ text: String, seconds: Double) {
        (self.text, self.seconds) = (text, seconds)
    }

    /// A default of whole seconds from the core's constant, shown as `Ns`.
    init(_ duration: Duration) {
        let seconds = duration.components.seconds
        self.init("\(seconds)s", seconds: Double(seconds))
    }

    /// The longest duration any option takes: about a century.
    static let longest = DurationArgument("36500d", seconds: 36500 * 86400)

    /// The value as a Duration; `check` has kept it within `longest`.
    var duration: Duration { Units.duration(seconds: seconds, limit: Self.longest.seconds) }

    /// A usage error that says the range, for a value outside `lowest...highest`
    /// (`above` excludes the lower bound).
    func check(_ flag: String, from lowest: DurationArgument, above: Bool = false, to highest: DurationArgument) throws
    {
        let low = above ? seconds > lowest.seconds : seconds >= lowest.seconds
        guard low, seconds <= highest.seconds else {
            throw ValidationError("\(flag) \(text): use \(above ? "more than " : "")\(lowest) to \(highest)")
        }
    }
    var description: String { text }
    var defaultValueDescription: String { text }
}

/// A usage error (64) that says the range, for a number out of it. Numeric
/// options are parsed `.unconditional`, so `-1` is a value out of range, not a
/// missing one.
func checkRange<T: Comparable>(_ flag: String, _ value: T, _ range: ClosedRange<T>) throws {
    guard range.contains(value) else {
        throw ValidationError("\(flag) \(value): use \(range.lowerBound) to \(range.upperBound)")
    }
}

/// Sizes: bytes, k/M/G (decimal) or KiB/MiB/GiB (binary), e.g. `200MiB`.
struct SizeArgument: ExpressibleByArgument {
    let bytes: Int64

    init?(argument: String) {
        guard let bytes = Units.parseSize(argument) else { return nil }
        self.bytes = bytes
    }
}

/// `--shard K/N`.
/// `--shard K/N`, or `--shard job/N`: shard JOB_COMPLETION_INDEX + 1 of N, the
/// index a Kubernetes Indexed Job gives each pod (0 to completions - 1), so the
/// Job's args need no shell to compute it.
enum ShardArgument: ExpressibleByArgument, Sendable {
    case fixed(Shard)
    case jobIndex(count: Int)

    static let indexVariable = "JOB_COMPLETION_INDEX"

    init?(argument: String) {
        if argument.hasPrefix("job/") {
            guard let count = Int(argument.dropFirst(4)), count > 0 else { return nil }
            self = .jobIndex(count: count)
        } else {
            guard let shard = Shard(argument) else { return nil }
            self = .fixed(shard)
        }
    }

    /// The shard, reading the index from `environment` for `job/N`.
    func resolve(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Shard {
        switch self {
        case .fixed(let shard): return shard
        case .jobIndex(let count):
            guard let text = environment[Self.indexVariable], !text.isEmpty else {
                throw FPError.usage(
                    "--shard job/\(count): \(Self.indexVariable) is not set (a Kubernetes Indexed Job sets it in each pod)"
                )
            }
            guard let index = Int(text), (0..<count).contains(index), let shard = Shard("\(index + 1)/\(count)") else {
                throw FPError.usage(
                    "--shard job/\(count): \(Self.indexVariable)=\(text) is not an index from 0 to \(count - 1)")
            }
            return shard
        }
    }
}

/// `--latency 200` or `--latency 100-300`, in milliseconds.
struct LatencyArgument: ExpressibleByArgument {
    let milliseconds: [Int]

    init?(argument: String) {
        guard let values = Units.parseLatency(argument) else { return nil }
        milliseconds = values
    }
}

/// `--rate N`, `N/s` or `N/m`: a request budget above 0.
extension RequestPacer.Rate: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
    public static var defaultCompletionKind: CompletionKind { .default }
}
