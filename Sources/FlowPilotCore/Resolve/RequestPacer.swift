import Foundation
import Synchronization

/// Paces every request of a run (resolves, batches, retries and media alike)
/// to a rate, and holds them all back while the backend has asked for a pause
/// (`Retry-After`): a backend that says "slow down" slows the whole run, not
/// only the request that heard it.
///
/// Requests take evenly spaced slots, `1 / rate` apart, with no burst: the
/// first goes at once, each next one a slot after the previous one, or later
/// when a pause runs past it. Without a rate, slots are free and only pauses
/// hold requests back.
public final class RequestPacer: Sendable {
    /// A request budget: `count` requests per `per`.
    public struct Rate: Sendable, Equatable, CustomStringConvertible {
        public let count: Int
        public let per: Per

        public enum Per: String, Sendable {
            case second = "s"
            case minute = "m"
            var seconds: Double { self == .second ? 1 : 60 }
        }

        public init?(count: Int, per: Per) {
            guard count > 0 else { return nil }
            (self.count, self.per) = (count, per)
        }

        /// `N`, `N/s` or `N/m`, N a whole number above 0; nil otherwise.
        public init?(_ text: String) {
            var number = Substring(text)
            var per = Per.second
            if let slash = text.firstIndex(of: "/") {
                guard let unit = Per(rawValue: String(text[text.index(after: slash)...])) else { return nil }
                per = unit
                number = text[..<slash]
            }
            guard number.allSatisfy(\.isASCII), let count = Int(number) else { return nil }
            self.init(count: count, per: per)
        }

        public var perSecond: Double { Double(count) / per.seconds }
        public var description: String { "\(count)/\(per.rawValue)" }
    }

    public let rate: Rate?
    private let interval: Duration
    private struct State {
        var nextSlot: ContinuousClock.Instant
        var pausedUntil: ContinuousClock.Instant
        var waited: Duration = .zero
    }
    private let state: Mutex<State>

    public init(rate: Rate? = nil) {
        self.rate = rate
        interval = rate.map { .nanoseconds(Int64((1e9 / $0.perSecond).rounded())) } ?? .zero
        let now = ContinuousClock.now
        state = Mutex(State(nextSlot: now, pausedUntil: now))
    }

    /// Waits for this request's slot. Cancellation ends the wait early.
    public func admit() async {
        let now = ContinuousClock.now
        let slot = state.withLock { state -> ContinuousClock.Instant in
            let slot = max(now, state.nextSlot, state.pausedUntil)
            state.nextSlot = slot + interval
            state.waited += slot - now
            return slot
        }
        if slot > now { try? await Task.sleep(until: slot, clock: .continuous) }
    }

    /// Holds every request not yet admitted until `seconds` from now.
    public func pause(seconds: Double) {
        // Not finite, negative or beyond 10 s: callers clamp (RetryAfter), and this holds whatever they pass.
        guard seconds.isFinite, seconds > 0 else { return }
        let seconds = min(seconds, RetryAfter.limit)
        let until = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        state.withLock { $0.pausedUntil = max($0.pausedUntil, until) }
    }

    /// The time requests spent waiting for their slot, added up over requests.
    public var waited: Duration { state.withLock { $0.waited } }
}
