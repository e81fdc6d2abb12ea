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
