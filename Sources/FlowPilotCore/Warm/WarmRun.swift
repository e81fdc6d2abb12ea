import Foundation
import NIOCore
import Synchronization

/// A warm over a stream of identities, as `fpctl warm` runs it: identities
/// de-duplicated and filtered to one shard, `concurrency` of them resolving at
/// once, each identity's outcomes handed on as it finishes, then a wait of up to
/// `grace` for resolves that outlived their callers' timeout.
public struct WarmRun: Sendable {
    public struct Options: Sendable {
        public var placements: [String]
        /// Identities resolving at once (`--concurrency`): each with its
        /// request in flight, or its answer being written. An identity whose
        /// flows are written and wait for their group commit gives its place
        /// to the next one; at most `concurrency` more wait that way
        /// (`maxInFlight`).
        public var concurrency = Options.defaultConcurrency
        /// The default of `concurrency`, and of the media downloads at once.
        public static let defaultConcurrency = 8
        public var shard: Shard?
        /// How long to wait at the end for late resolves and fonts.
        public var grace: Duration = .seconds(10)
        /// An earlier attempt whose warmed and no-flow pairs are not tried again.
        public var resume: WarmResume?
        /// How long the identities in flight get to finish after a stop
        /// (SIGTERM): well inside Kubernetes' default 30 s termination grace,
        /// with time left to write the rows and sync them.
        public var stopTimeout: Duration = Options.defaultStopTimeout
        public static let defaultStopTimeout: Duration = .seconds(10)

        /// `placements` de-duplicated, first occurrences kept in order.
        public init(placements: [String]) {
            var seen = Set<String>()
            self.placements = placements.filter { seen.insert($0).inserted }
        }

        /// Identities started and not yet handed on, at most: those resolving
        /// and as many again waiting for their group commit. Except at
        /// `concurrency` 1, which keeps one identity at a time, commit
        /// included, so that its rows come in input order (two identities
        /// told by one commit could otherwise be handed on either way round).
        public var maxInFlight: Int { concurrency == 1 ? 1 : 2 * concurrency }

        /// The HTTP connections a run needs to one backend host so that no
        /// request waits for one: each identity in flight has one batch
        /// request, or, when the backend has no batch endpoint (found out
        /// during the run, or `--no-batch`), one request per placement; plus
        /// the media downloads. A pool only opens connections as requests need
        /// them, so a backend with batches still uses `concurrency`.
        public func connections(mediaConcurrency: Int) -> Int {
            concurrency * max(1, placements.count) + mediaConcurrency
        }

        /// The file descriptors a run holds at most: each identity in flight
        /// (`maxInFlight`) one staged file per placement until its group commit
        /// and the cache's lock; a socket per identity resolving (one per
        /// placement without batches); one per media download.
        public func descriptors(mediaConcurrency: Int, batch: Bool) -> Int {
            let placements = max(1, self.placements.count)
            return maxInFlight * (placements + 1) + concurrency * (batch ? 1 : placements) + mediaConcurrency
        }

        /// Lowers `concurrency`, then `mediaConcurrency`, until the run's
        /// descriptors fit in `available` (`Platform.freeDescriptors`), never
        /// below 1: with `ulimit -n 64` a warm runs a few identities at a time
        /// instead of failing rows with EMFILE after their requests were sent.
        /// Returns the media concurrency to use; says nothing itself.
        public mutating func fit(descriptors available: Int, mediaConcurrency: Int, batch: Bool) -> Int {
            var media = mediaConcurrency
            while concurrency > 1, descriptors(mediaConcurrency: media, batch: batch) > available {
                // A large step first, then one at a time near the fit.
                let over = descriptors(mediaConcurrency: media, batch: batch) - available
                concurrency = max(1, concurrency - max(1, over / (3 * max(1, placements.count) + 2)))
            }
            while media > 1, descriptors(mediaConcurrency: media, batch: batch) > available { media -= 1 }
            return media
        }
    }

    /// Outcomes so far, by state.
    public struct Counts: Sendable, Equatable {
        public var identities = 0
        public var warmed = 0
        public var noFlow = 0
        public var failed = 0
        /// The first failure to write the cache, if any (`cache-write`).
        public var cacheWriteFailure: String?

        mutating func add(_ outcomes: [PrefetchOutcome]) {
            identities += 1
            for outcome in outcomes {
                switch outcome.state {
                case .warmed: warmed += 1
                case .noFlow: noFlow += 1
                case .failed:
                    failed += 1
                    if outcome.errorCode == "cache-write", cacheWriteFailure == nil {
                        cacheWriteFailure = outcome.errorMessage ?? "the cache cannot be written"
                    }
                }
            }
        }
    }

    public struct Summary: Sendable {
        public let counts: Counts
        /// Live requests made, and whether any reached the backend.
        public let reach: BackendReach
        /// Resolves that outlived their timeout: landed in the cache within the grace, or still running.
        public let lateLanded: Int
        public let latePending: Int
        public let elapsed: Duration
        /// The run was stopped (`StopRequest`) before its input ended.
        public var stopped = false
        /// Identities still in flight when a stop's deadline passed: no rows.
        public var abandoned = 0

        /// `interrupted` when it was stopped; `unavailable` when no request
        /// reached the backend and nothing was warmed; `partial` when
        /// outcomes `failOn` counts happened; nil when the run did all it was
        /// asked.
        public func verdict(failOn: FailOn) -> Verdict? {
            if stopped { return .interrupted }
            // A cache that cannot be written is not the backend's fault, nor worth retrying as is: 73.
            if let reason = counts.cacheWriteFailure { return .unchecked(.cannotWrite(reason)) }
            if reach.reachedNone && counts.warmed == 0 { return .unavailable }
            switch failOn {
            case .failed: return counts.failed > 0 ? .partial : nil
            case .noFlow: return counts.failed + counts.noFlow > 0 ? .partial : nil
            case .never: return nil
            }
        }
    }

    /// Which outcomes make a run partial (`--fail-on`).
    public enum FailOn: String, Sendable, CaseIterable {
        case failed
        case noFlow = "no-flow"
        case never
    }

    public let warmer: Warmer
    public let options: Options

    public init(warmer: Warmer, options: Options) {
        self.warmer = warmer
        self.options = options
    }

    /// Fingerprints remembered for de-duplication; past this many, repeats are
    /// left to the cache (a fresh hit costs no request), so memory stays bounded.
    static let dedupLimit = 1_000_000

    /// The first 128 bits of a fingerprint: 16 bytes a seen identity instead of
    /// a 64-character string (a million identities in ~40 MB, not ~150 MB), and
    /// no two distinct identities of a run share them but with odds near 2^-88.
    struct FingerprintKey: Hashable {
        let high: UInt64
        let low: UInt64

        init(_ fingerprint: String) {
            let utf8 = Array(fingerprint.utf8.prefix(32))
            func word(_ bytes: ArraySlice<UInt8>) -> UInt64 {
                bytes.reduce(0) { value, byte in
                    let digit: UInt8 =
                        switch byte {
                        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
                        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
                        default: 0
                        }
                    return value << 4 | UInt64(digit)
                }
            }
            high = word(utf8.prefix(16))
            low = word(utf8.dropFirst(16))
        }
    }

    /// Runs the warm. `onIdentity` gets each identity's outcomes as soon as it
    /// finishes, in the order the identities finish, one call at a time, also
    /// while the input waits for its next line (a slow pipe); identities start
    /// in input order, at most `concurrency` resolving at once (and
    /// `maxInFlight` in all, counting those whose flows wait for their group
    /// commit), and at most `concurrency` more are read ahead, so a slow
    /// consumer slows the run instead of growing it. An error from
    /// `identities` (an unreadable line) ends the run: nothing more is read,
    /// every identity before that line is warmed and handed on, then the
    /// error is rethrown.
    ///
    /// `stop` (SIGTERM, SIGINT) ends the run early and cleanly: no identity is
    /// read or started after it, the identities in flight get up to
    /// `options.stopTimeout` to finish (their rows are handed on as usual),
    /// those still running then are left without a row (a resumed attempt
    /// tries them again), no grace is waited, and the summary says `stopped`.
    /// A read of the input that is waiting for its next line is not waited for.
    public func run<Identities: AsyncSequence>(
        _ identities: Identities, stop: StopRequest = StopRequest(),
        onIdentity: ([PrefetchOutcome], Counts) -> Void
    ) async throws -> Summary where Identities.Element == Identity {
        let started = ContinuousClock.now
        var counts = Counts()
        var seen = Set<FingerprintKey>()
        let warmer = self.warmer
        let placements = options.placements
        var iterator = identities.makeAsyncIterator()
        let input = InputReader { try await iterator.next() }
        // Every task of the run (the one reading the next identity, the
        // identities being prefetched, the stop and its deadline) reports here;
        // the tasks are unstructured so that a stopped run need not wait for a
        // read blocked on a pipe or an identity past its deadline.
        let (events, sink) = AsyncStream<Event>.makeStream()
        stop.onRequest { sink.yield(.stop) }
        // Starts identities from the queue whenever there is room: here, and
        // from an identity's own `answered` (so the next request goes out
        // without waiting for this loop).
        let launcher = Launcher(warmer: warmer, options: options, sink: sink)
        var reading = false
        var ended = false
        var stopped = false
        // The cache cannot be written (read-only, full): no identity is started after the first such row.
        var halted = false
        var readError: (any Error)?
        var tasks: [Task<Void, Never>] = []
        defer { for task in tasks { task.cancel() } }
        // The input is read ahead, up to `concurrency` identities beyond those
        // that can start now, by one task that hands each on as soon as it is
        // read (a slow pipe delays nothing already read): when many identities
        // finish at once, the next ones start from the queue, not one read at
        // a time.
        func readNext() {
            let credit = launcher.readCredit
            guard !reading, !ended, credit > 0 else { return }
            reading = true
            Task {
                do {
                    // A stop ends the reading at the next line, not `credit` lines later.
                    for _ in 0..<credit where !stop.isRequested {
                        guard let identity = try await input.next() else {
                            sink.yield(.read(nil))
                            return
                        }
                        sink.yield(.read(identity))
                    }
                    sink.yield(.paused)
                } catch {
                    sink.yield(.readFailed(error))
                }
            }
        }
        readNext()
        loop: for await event in events {
            switch event {
            case .answered:
                break
            case .finished(let outcomes):
                launcher.finished()
                counts.add(outcomes)
                onIdentity(outcomes, counts)
                if counts.cacheWriteFailure != nil, !halted {
                    (halted, ended) = (true, true)
                    launcher.stop()
                }
            case .read(nil):
                (reading, ended) = (false, true)
            case .paused:
                reading = false
            case .read(let identity?):
                if stopped || halted { break }
                let fingerprint = identity.fingerprint
                if let shard = options.shard, !shard.contains(fingerprint: fingerprint) { break }
                if seen.count < Self.dedupLimit, !seen.insert(FingerprintKey(fingerprint)).inserted { break }
                let keys = options.resume?.remaining(fingerprint: fingerprint) ?? placements
                if keys.isEmpty { break }
                launcher.enqueue(identity, keys)
            case .readFailed(let error):
                (reading, ended) = (false, true)
                // Raised once every identity read before the bad line has its row.
                if !stopped { readError = error }
            case .stop:
                guard !stopped else { break }
                (stopped, ended) = (true, true)
                launcher.stop()
                let timeout = options.stopTimeout
                tasks.append(
                    Task {
                        try? await Task.sleep(for: timeout)
                        if !Task.isCancelled { sink.yield(.deadline) }
                    })
            case .deadline:
                break loop
            }
            launcher.launch()
            let (running, queued) = launcher.counts
            if ended && running == 0 && (stopped || halted || (!reading && queued == 0)) { break }
            readNext()
        }
        if let readError { throw readError }
        let abandoned = launcher.counts.running
        let late = stopped ? (landed: 0, pending: 0) : await warmer.waitForLateResolves(grace: options.grace)
        return Summary(
            counts: counts, reach: warmer.reach,
            lateLanded: late.landed, latePending: late.pending, elapsed: .now - started,
            stopped: stopped, abandoned: abandoned)
    }
}

/// Shard K of N (`--shard K/N`): the identities whose fingerprint, read as a
/// number, is K-1 modulo N. Stable across runs and machines.
public struct Shard: Sendable, Hashable, CustomStringConvertible {
    public let index: Int
    public let count: Int

    public var description: String { "\(index)/\(count)" }

    /// `K/N` with 1 <= K <= N.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]), n > 0, (1...n).contains(k) else {
            return nil
        }
        (index, count) = (k, n)
    }

    public func contains(fingerprint: String) -> Bool { Self.index(of: fingerprint, among: count) == index }

    /// Which of `count` shards (1-based) a fingerprint belongs to.
    public static func index(of fingerprint: String, among count: Int) -> Int {
        // The first 15 hex digits (60 bits) fit a UInt64 whatever the digits.
        let number = UInt64(fingerprint.prefix(15), radix: 16) ?? 0
        return Int(number % UInt64(max(count, 1))) + 1
    }
}

extension WarmRun {
    /// What a task of a run hands back: an identity read (nil at the end of
    /// the input), or one prefetched.
    enum Event: Sendable {
        case read(Identity?)
        /// The reading task read its share and ended; the next one starts when there is room.
        case paused
        case readFailed(any Error)
        /// An identity's requests were answered and its flows written: its
        /// place among those resolving is free (it is still running until
        /// `finished`; the launcher has started the next one). Always before
        /// that identity's `finished`.
        case answered
        case finished([PrefetchOutcome])
        /// A stop was requested, and its deadline passed.
        case stop, deadline
    }

    /// The identities read and not yet started, in input order, and those
    /// started: at most `concurrency` resolving, `maxInFlight` in all. An
    /// identity starts when there is room: from the run's loop (an identity
    /// read, one finished) or straight from the identity that gave up its
    /// place on being answered.
    final class Launcher: Sendable {
        private struct State {
            var queued = CircularBuffer<(Identity, [String])>()
            var running = 0
            var resolving = 0
            var stopped = false
        }

        private let state = Mutex(State())
        private let warmer: Warmer
        private let options: Options
        private let sink: AsyncStream<Event>.Continuation

        init(warmer: Warmer, options: Options, sink: AsyncStream<Event>.Continuation) {
            (self.warmer, self.options, self.sink) = (warmer, options, sink)
        }

        /// Identities started and not handed on, and identities waiting to start.
        var counts: (running: Int, queued: Int) { state.withLock { ($0.running, $0.queued.count) } }

        /// How many more identities to read ahead: enough for the room there
        /// is now, plus `concurrency` queued.
        var readCredit: Int {
            state.withLock { state in
                let room = min(options.concurrency - state.resolving, options.maxInFlight - state.running)
                return options.concurrency + max(0, room) - state.queued.count
            }
        }

        func enqueue(_ identity: Identity, _ keys: [String]) {
            state.withLock { $0.queued.append((identity, keys)) }
        }

        /// No identity starts from now on.
        func stop() { state.withLock { $0.stopped = true } }

        /// An identity was handed on.
        func finished() { state.withLock { $0.running -= 1 } }

        /// Starts queued identities while there is room.
        func launch() {
            let starting = state.withLock { state -> [(Identity, [String])] in
                var starting: [(Identity, [String])] = []
                while state.resolving < options.concurrency, state.running < options.maxInFlight, !state.stopped,
                    let next = state.queued.popFirst()
                {
                    state.running += 1
                    state.resolving += 1
                    starting.append(next)
                }
                return starting
            }
            for (identity, keys) in starting {
                Task {
                    let outcomes = await warmer.prefetch(keys, for: identity) {
                        self.state.withLock { $0.resolving -= 1 }
                        self.launch()
                        self.sink.yield(.answered)
                    }
                    sink.yield(.finished(outcomes))
                }
            }
        }
    }

    /// The input's iterator, moved into the one reading task at a time
    /// (`run` never starts a read while one is pending), which is what makes
    /// handing it across tasks safe.
    final class InputReader: @unchecked Sendable {
        private let read: () async throws -> Identity?

        init(_ read: @escaping () async throws -> Identity?) { self.read = read }

        func next() async throws -> Identity? { try await read() }
    }
}
