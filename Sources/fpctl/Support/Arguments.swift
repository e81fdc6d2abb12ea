import ArgumentParser
import FlowPilotCore

/// A duration such as `90s`, `60d` or `1h30m` (units ms s m h d w).
struct DurationArgument: ExpressibleByArgument {
    let seconds: Double

    init?(argument: String) {
        guard let seconds = Units.parseDuration(argument) else { return nil }
        self.seconds = seconds
    }

    static var defaultCompletionKind: CompletionKind { .default }
}
