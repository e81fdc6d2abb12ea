import Foundation
import NIOCore

/// A warm over a stream of identities, as `fpctl warm` runs it: identities
/// de-duplicated and filtered to one shard, `concurrency` of them resolving at
/// once, each identity's outcomes handed on as it finishes, then a wait of up to
/// `grace` for resolves that outlived their callers' timeout.
public struct WarmRun: Sendable {
    public struct Options: Sendable {
        public var placements: [String]
        /// Every limit of the run (`WarmLimits`): the loop's, the client's, the downloads'.
        public let limits: WarmLimits
        public var shard: Shard?
        /// An earlier attempt whose warmed and no-flow pairs are not tried again.
        public var resume: WarmResume?
        /// How long the identities in flight get to finish after a stop
        /// (SIGTERM): well inside Kubernetes' default 30 s termination grace,
        /// with time left to write the rows and sync them.
        public var stopTimeout: Duration = Options.defaultStopTimeout
        public static let defaultStopTimeout: Duration = .seconds(10)

        /// `placements` de-duplicated, first occurrences kept in order;
        /// `limits` as the run keeps them (nil: the defaults for these placements).
        public init(placements: [String], limits: WarmLimits? = nil) {
            var seen = Set<ExactName>()
            self.placements = placements.filter { seen.insert(ExactName($0)).inserted }
            self.limits = limits ?? WarmLimits(placements: self.placements.count)
        }

        /// Identities resolving at once (`--concurrency`): each with its
        /// request in flight. An identity whose answer came gives its place
        /// to the next one while its flows are written and wait for their
        /// group commit; at most `concurrency` more wait that way (`maxInFlight`).
        public var concurrency: Int { limits.concurrency }
        /// Identities started and not yet handed on, at most (`WarmLimits.maxInFlight`).
        public var maxInFlight: Int { limits.maxInFlight }
        /// How long to wait at the end for late resolves and fonts.
        public var grace: Duration { limits.grace }
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
        /// Resolves that outlived their timeout, by what became of them within the grace.
        public let late: LateResolves
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

    /// The identities a run has seen lately, for de-duplication in memory
    /// that does not grow with the input: two generations of up to
    /// `generation` fingerprints each, the older dropped when the newer
    /// fills. A repeat among the last `generation` distinct identities (up to
    /// twice that) is skipped; one further back is looked up again: a fresh
    /// cache hit, no request, and a second row. 49,152 is three quarters of
    /// 65,536, the most a set of 65,536 buckets holds before it grows: 1 MiB
    /// of 16-byte keys a generation.
    struct RecentIdentities {
        static let generation = 49_152
        private var current = Set<FingerprintKey>(minimumCapacity: Self.generation)
        private var previous = Set<FingerprintKey>()

        /// How many fingerprints are remembered now: never more than twice `generation`.
        var remembered: Int { current.count + previous.count }

        /// Remembers `key`; false when it was seen within the window.
        mutating func insert(_ key: FingerprintKey) -> Bool {
            if previous.contains(key) || !current.insert(key).inserted { return false }
            if current.count >= Self.generation {
                previous = current
                current = Set(minimumCapacity: Self.generation)
            }
            return true
        }
    }

    /// The first 128 bits of a fingerprint: 16 bytes a seen identity instead of
    /// a 64-character string, and no two distinct identities of a run share
    /// them but with odds near 2^-88.
    struct FingerprintKey: Hashable {
        let high: UInt64
        let low: UInt64

        init(_ fingerprint: String) {
            // A fingerprint's first 32 digits, eight at a time (`LogRecord.hex8`); the loop below only
            // for text that is not lowercase hex (a resumed file's), which no fingerprint made here is.
            var text = fingerprint
            let words = text.withUTF8 { utf8 -> (UInt64, UInt64)? in
                guard utf8.count >= 32 else { return nil }
                let raw = UnsafeRawBufferPointer(utf8)
                func four(_ at: Int) -> UInt64? {
                    LogRecord.hex8(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt64.self)))
                        .map(UInt64.init)
                }
                guard let a = four(0), let b = four(8), let c = four(16), let d = four(24) else { return nil }
                return (a << 32 | b, c << 32 | d)
            }
            if let words {
                (high, low) = words
                return
            }
            let utf8 = Array(fingerprint.utf8.prefix(32))
            func word(_ bytes: ArraySlice<UInt8>) -> UInt64 {
                // Anything but a lowercase hex digit counts as 0.
                bytes.reduce(0) { $0 << 4 | UInt64(LogRecord.nibble($1) ?? 0) }
            }
            high = word(utf8.prefix(16))
            low = word(utf8.dropFirst(16))
        }
    }

    /// Runs the warm. `onIdentity` gets each identity's outcomes once its
    /// flows are durable, in the order the identities finish, one call at a
    /// time, also while the input waits for its next line (a slow pipe);
    /// identities start in input order, at most `concurrency` resolving at
    /// once and at most `maxInFlight` in all (counting those whose flows wait
    /// for their group commit), and at most `concurrency` more are read
    /// ahead, so a slow consumer slows the run instead of growing it. An
    /// error from `identities` (an unreadable line) ends the run: nothing
    /// more is read, every identity before that line is warmed and handed
    /// on, then the error is rethrown.
    ///
    /// `stop` (SIGTERM, SIGINT) ends the run early and cleanly: no identity is
    /// read or started after it, the identities in flight get up to
    /// `options.stopTimeout` to finish (their rows are handed on as usual),
    /// those still running then are left without a row (a resumed attempt
    /// tries them again), no grace is waited, and the summary says `stopped`.
    /// A read of the input that is waiting for its next line is not waited for.
    ///
    /// The flow control (docs/decisions.md, "Warm's flow control"): one loop
    /// over one task group, whose children (a line's read, a stop's
    /// deadline) and whose identities' prefetches post events to the loop
    /// (`Mailbox`): a line read, an identity answered (its requests
    /// answered, its flows handed to the cache's writer), an identity
    /// finished (its flows written and durable, its images downloaded), both
    /// from the one engine, `Warmer.prefetch(_:for:answered:finished:)`,
    /// which needs no task for an identity; a stop or its deadline. The loop
    /// alone keeps the counts and starts the identities; the prefetches
    /// share the warmer (its cache, its requests and downloads in flight,
    /// which outlive a caller), never the loop's state.
    public func run<Identities: AsyncSequence>(
        _ identities: Identities, stop: StopRequest = StopRequest(),
        onIdentity: ([PrefetchOutcome], Counts) -> Void
    ) async throws -> Summary where Identities.Element == Identity {
        var iterator = identities.makeAsyncIterator()
        return try await run(InputReader { try await iterator.next() }, stop: stop, onIdentity: onIdentity)
    }

    /// `run` over an identities file: the lines of a chunk already read are
    /// taken by the loop itself, with no task for each; only a read that
    /// waits for the file or pipe runs in a child task.
    public func run(
        _ identities: IdentityLines, stop: StopRequest = StopRequest(),
        onIdentity: ([PrefetchOutcome], Counts) -> Void
    ) async throws -> Summary {
        var iterator = identities.makeAsyncIterator()
        let input = InputReader {
            try await iterator.next()
        } readAhead: {
            try iterator.nextIfBuffered()
        }
        return try await run(input, stop: stop, onIdentity: onIdentity)
    }

    private func run(
        _ input: InputReader, stop: StopRequest, onIdentity: ([PrefetchOutcome], Counts) -> Void
    ) async throws -> Summary {
        let started = ContinuousClock.now
        let stopRequested = Pending<Void>()
        stop.onRequest { stopRequested.fulfil(()) }
        // Children post their events here (one child an identity posts two: answered, then finished).
        let events = Mailbox<Event>()
        let warmer = self.warmer
        let loop = await withDiscardingTaskGroup(returning: Loop.self) { group in
            // The loop's state is this closure's own: its methods change it in place, unchecked at run time.
            var loop = Loop(run: self)
            group.addTask { events.post(await stopRequested.valueUnlessCancelled == nil ? .cancelled : .stop) }
            loop.startWhatFits(&group, events: events, input: input)
            // Checked before each wait: the loop may finish the run itself (a bad line read from a
            // chunk it had, nothing in flight), and then no child will post again.
            eventLoop: while !loop.flow.isDone {
                let event = await events.next()
                switch event {
                case .read, .readFailed:
                    loop.take(event)
                case .answered:
                    loop.flow.answered()
                case .finished(let outcomes):
                    loop.flow.finished()
                    loop.counts.add(outcomes)
                    onIdentity(outcomes, loop.counts)
                    // The cache cannot be written (read-only, full): no identity starts after the first such row.
                    if loop.counts.cacheWriteFailure != nil { loop.flow.halt() }
                case .stop:
                    loop.flow.stop()
                    let timeout = options.stopTimeout
                    group.addTask { events.post((try? await Task.sleep(for: timeout)) == nil ? .cancelled : .deadline) }
                case .deadline:
                    break eventLoop
                case .cancelled:
                    break
                }
                loop.startWhatFits(&group, events: events, input: input)
            }
            // The stop watcher, a read waiting for its line, identities past the
            // stop's deadline: each child waits in a way that ends on cancellation.
            group.cancelAll()
            return loop
        }
        if let readError = loop.readError { throw readError }
        let late: LateResolves
        if loop.flow.stopped {
            // No grace at a stop, but the aliases and the segment end as at a normal end.
            warmer.finishStopped()
            late = LateResolves()
        } else {
            late = await warmer.waitForLateResolves(grace: options.grace)
        }
        return Summary(
            counts: loop.counts, reach: warmer.reach, late: late, elapsed: .now - started,
            stopped: loop.flow.stopped, abandoned: loop.flow.inFlight)
    }

    /// What the run's loop keeps: its flow control, counts, the identities
    /// seen lately, and the error that ended the input.
    struct Loop {
        let run: WarmRun
        var flow: FlowControl
        var counts = Counts()
        var seen = RecentIdentities()
        var readError: (any Error)?

        init(run: WarmRun) {
            self.run = run
            flow = FlowControl(options: run.options)
        }

        /// Starts the identities there is room for, taking lines read
        /// already into the queue while it has room, and a read of the
        /// next line when it needs one.
        mutating func startWhatFits(_ group: inout DiscardingTaskGroup, events: Mailbox<Event>, input: InputReader) {
            let warmer = run.warmer
            while true {
                // No task an identity: its prefetch posts as its answers, commits and images come.
                while let (identity, keys) = flow.nextToStart() {
                    warmer.prefetch(
                        keys, for: identity, answered: { events.post(.answered) },
                        finished: { events.post(.finished($0)) })
                }
                // Lines read already need no task: the queue takes them while it has room.
                guard flow.mayRead, let line = input.buffered() else { break }
                take(line)
            }
            if flow.shouldRead() { group.addTask { events.post(await input.next()) } }
        }

        /// A line read (by a child, or taken from what was read already).
        mutating func take(_ event: Event) {
            switch event {
            case .read(let identity?):
                flow.reading = false
                if let (identity, keys) = run.admit(identity, seen: &seen) { flow.queue.append((identity, keys)) }
            case .read(nil):
                (flow.reading, flow.ended) = (false, true)
            case .readFailed(let error):
                (flow.reading, flow.ended) = (false, true)
                // Raised once every identity read before the bad line has its row.
                if !flow.stopped { readError = error }
            default: break
            }
        }
    }

    /// The identity to start for a line read, with the placements it still
    /// needs; nil when it is another shard's, a repeat, or done in the
    /// attempt resumed.
    private func admit(_ identity: Identity, seen: inout RecentIdentities) -> (Identity, [String])? {
        let fingerprint = identity.fingerprint
        if let shard = options.shard, !shard.contains(fingerprint: fingerprint) { return nil }
        if !seen.insert(FingerprintKey(fingerprint)) { return nil }
        let keys = options.resume?.remaining(fingerprint: fingerprint) ?? options.placements
        return keys.isEmpty ? nil : (identity, keys)
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
    /// What a child task of a run hands back.
    enum Event: Sendable {
        /// A line read (nil at the end of the input), or why it could not be.
        case read(Identity?)
        case readFailed(any Error)
        /// An identity's requests answered; its flows are being written.
        case answered
        /// An identity's outcomes, its flows written and durable.
        case finished([PrefetchOutcome])
        /// A stop was requested, and its deadline passed.
        case stop, deadline
        /// A child that ended because the run did.
        case cancelled
    }

    /// The run's counts and its two limits: identities resolving (at most
    /// `concurrency`), and those plus the ones answered whose flows are
    /// being written and committed (at most `maxInFlight`). Only the run's
    /// loop touches it.
    struct FlowControl {
        let options: Options
        /// Identities read, admitted and not yet started, in input order.
        var queue = CircularBuffer<(Identity, [String])>()
        var resolving = 0
        var writing = 0
        /// A read of the input is running.
        var reading = false
        /// No more is read: the input ended or failed, a stop, a cache that cannot be written.
        var ended = false
        var stopped = false
        var halted = false

        init(options: Options) { self.options = options }

        var inFlight: Int { resolving + writing }

        /// The next identity to start, counted as resolving, while there is room.
        mutating func nextToStart() -> (Identity, [String])? {
            guard !stopped, !halted, resolving < options.concurrency, inFlight < options.maxInFlight,
                let next = queue.popFirst()
            else { return nil }
            resolving += 1
            return next
        }

        /// Whether a line may be read now: one read at a time, up to `concurrency` identities queued.
        var mayRead: Bool { !reading && !ended && queue.count < options.concurrency }

        /// Whether to start a read of the next line (`mayRead`), counted as running.
        mutating func shouldRead() -> Bool {
            guard mayRead else { return false }
            reading = true
            return true
        }

        mutating func answered() { (resolving, writing) = (resolving - 1, writing + 1) }
        mutating func finished() { writing -= 1 }

        mutating func stop() { (stopped, ended) = (true, true) }
        mutating func halt() { (halted, ended) = (true, true) }

        /// Nothing is running and nothing more will start.
        var isDone: Bool {
            ended && inFlight == 0 && (stopped || halted || (!reading && queue.isEmpty))
        }
    }

    /// The input's iterator, read one line at a time (the loop never starts
    /// a read while one is running, which is what makes handing it across
    /// tasks safe). A read that may wait runs in a task of its own, whose
    /// result the run's child waits for in a way that ends on cancellation:
    /// a stopped run does not wait for a read blocked on a pipe. Lines read
    /// already (`buffered`, when the iterator can say) are taken by the loop.
    final class InputReader: @unchecked Sendable {
        private let read: () async throws -> Identity?
        private let readAhead: (() throws -> Identity??)?

        /// `readAhead`: the next identity without waiting, nil when it needs a `read` (`IdentityLines`).
        init(_ read: @escaping () async throws -> Identity?, readAhead: (() throws -> Identity??)? = nil) {
            self.read = read
            self.readAhead = readAhead
        }

        func next() async -> Event {
            let line = Pending<Event>.run {
                do { return .read(try await self.read()) } catch { return .readFailed(error) }
            }
            return await line.valueUnlessCancelled ?? .cancelled
        }

        /// The next line when it is read already; nil when it needs `next()`.
        func buffered() -> Event? {
            guard let readAhead else { return nil }
            do {
                guard let line = try readAhead() else { return nil }
                return .read(line)
            } catch {
                return .readFailed(error)
            }
        }
    }
}
