/// Work that must end by a deadline: `run` gives its result, or throws
/// `Deadline.Exceeded` when the deadline passes first, having cancelled it.
/// For a response body, whose bytes AsyncHTTPClient's own deadline does not
/// cover (it ends when the head arrives): a server that trickles a byte a
/// second is cut off here.
enum Deadline {
    struct Exceeded: Error {}

    static func run<T: Sendable>(
        until deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                throw Exceeded()
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw Exceeded() }
            return first
        }
    }
}

extension Duration {
    /// Whole nanoseconds (a deadline's resolution), saturating.
    var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        return whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
