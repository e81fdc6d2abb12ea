import Foundation

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
