import FlowPilotCore

/// The exit statuses fpctl documents (fpctl(1), EXIT STATUS). Every command
/// ends through one of these; no other number leaves the process. Commands
/// return, or throw an `FPError` (stopped) or a `Verdict` (ran to the end, and
/// the answer is not "all done"); `Entry` maps what they throw here, and only
/// here.
enum ExitStatus: Int32, Sendable, CaseIterable {
    /// Everything asked for was done.
    case success = 0
    /// An unexpected failure, or a negative answer (`ready`: not ready;
    /// `resolve`: no tier had a flow; `cache clear`: not confirmed).
    case failure = 1
    /// Partly done: some placements failed to warm (`warm --fail-on`); or
    /// `bundle diff`: a placement differs from what the backend serves, is
    /// missing on either side, or failed to resolve while another request
    /// reached the backend (none reaching it is 69), or the bundle is older
    /// than `--max-age`.
    case partial = 3
    /// Arguments that parse but do not make sense.
    case usage = 64
    /// Invalid data: a bundle, a cache directory, a flow, an identities file.
    case invalidData = 65
    /// An input file or directory does not exist.
    case inputMissing = 66
    /// The backend could not be reached for any request.
    case unavailable = 69
    /// The output cannot be written.
    case cannotWrite = 73
    /// Stopped by SIGTERM or SIGINT before the end, cleanly (`warm`: the rows
    /// of what finished and the closing JSON are written and synced): try
    /// again, resuming (EX_TEMPFAIL).
    case interrupted = 75

    /// The status of a failure the core reports: the one place where a kind of
    /// failure becomes a number.
    init(_ error: FPError) {
        switch error {
        case .invalid: self = .invalidData
        case .inputMissing: self = .inputMissing
        case .cannotWrite, .outputExists, .directoryNotEmpty: self = .cannotWrite
        case .usage: self = .usage
        case .unavailable: self = .unavailable
        case .failed: self = .failure
        }
    }

    /// The status of a command's answer.
    init(_ verdict: Verdict) {
        switch verdict {
        case .negative: self = .failure
        case .partial: self = .partial
        case .invalid: self = .invalidData
        case .unavailable: self = .unavailable
        case .incomplete: self = .cannotWrite
        case .interrupted: self = .interrupted
        case .unchecked(let error): self.init(error)
        }
    }
}
