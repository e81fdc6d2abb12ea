/// How a command that ran to its end answers when the answer is not "all
/// done". The command has printed what it found (findings, rows, a line on
/// standard error); what is left is the verdict, which the caller turns into
/// an exit status in one place (fpctl's `ExitStatus`). Failures that stop a
/// command before its end are `FPError`s.
public enum Verdict: Error, Sendable, Equatable {
    /// A negative answer: not ready, no tier had a flow, not confirmed.
    case negative
    /// Done in part: some placements failed to warm, a bundle differs from
    /// what the backend serves.
    case partial
    /// What was checked is invalid: a bundle, a cache directory.
    case invalid
    /// No request reached the backend (`BackendReach`).
    case unavailable
    /// Some files could not be written or removed (prune, clear).
    case incomplete
    /// Stopped early by a signal (SIGTERM, SIGINT), cleanly: what was done
    /// is reported whole, and the rest is for a resumed attempt.
    case interrupted
    /// An input could not be checked at all (missing, unreadable) while the
    /// others were: the error was printed with the rest, and it decides the
    /// status as if it had stopped the command.
    case unchecked(FPError)

    public static func == (a: Verdict, b: Verdict) -> Bool {
        switch (a, b) {
        case (.negative, .negative), (.partial, .partial), (.invalid, .invalid), (.unavailable, .unavailable),
            (.incomplete, .incomplete), (.interrupted, .interrupted):
            true
        case (.unchecked(let x), .unchecked(let y)): x.description == y.description
        default: false
        }
    }
}

/// Whether any request reached the backend: the one rule behind "no request
/// reached the backend" (exit status 69) for warm, resolve, ready, bundle pull
/// and bundle diff. Requests were made, and not one got an answer at all
/// (`ResolveFailure.isUnavailable`: unreachable, tls, proxy); a backend that
/// answered badly (a 5xx, an invalid body) was reached.
public struct BackendReach: Sendable, Equatable {
    /// Requests made (a batch request counts once; retries are inside one).
    public private(set) var requests = 0
    /// Requests that got no answer.
    public private(set) var unanswered = 0
    /// The first request's reason for getting no answer.
    public private(set) var first: ResolveFailure?

    public init() {}

    /// One request made: `failure` is why it failed, nil when it got an answer.
    public mutating func record(_ failure: ResolveFailure?) {
        requests += 1
        guard let failure, failure.isUnavailable else { return }
        unanswered += 1
        if first == nil { first = failure }
    }

    /// A request counted by `record` as unanswered (its caller's time ran
    /// out while every attempt so far had failed before reaching the
    /// backend) has ended: if it reached the backend after all, it is no
    /// longer counted as unanswered.
    public mutating func recordLate(_ failure: ResolveFailure?) {
        if failure?.isUnavailable != true { unanswered -= 1 }
    }

    /// Requests were made and none reached the backend.
    public var reachedNone: Bool { requests > 0 && unanswered == requests }

    /// `no request reached the backend: CODE: MESSAGE`, the line that says why.
    public var explanation: String {
        "no request reached the backend" + (first.map { ": \($0)" } ?? "")
    }

    /// The error a command that needs the backend ends with when nothing reached it.
    public var error: FPError? { reachedNone ? .unavailable(explanation) : nil }
}
