import Foundation
import Synchronization

/// The SDK's prefetch, isPlacementReady and resolution chain over a cache
/// directory: `TierChain` decides, `LiveResolver` does Tier 1 (shared, batched,
/// landing late), `MediaWarmer` warms images and fonts. This type only looks
/// things up and puts the three together; it keeps no state of its own.
public final class Warmer: Sendable {
    let store: CacheStore
    let bundle: LoadedBundle?
    let config: WarmConfiguration
    let live: LiveResolver
    let media: MediaWarmer

    public init(client: ResolveClient, store: CacheStore, bundle: LoadedBundle?, config: WarmConfiguration) {
        self.store = store
        self.bundle = bundle
        self.config = config
        self.media = MediaWarmer(
            store: store, transport: client.transport, log: client.requests, pacer: client.pacer,
            concurrency: config.mediaConcurrency)
        self.live = LiveResolver(client: client, store: store, media: media, config: config)
    }

    /// One placement's way through the chain: its outcome, the tiers tried, and
    /// the flow that was served.
    public struct Resolution: Sendable {
        public let outcome: PrefetchOutcome
        public let steps: [TierChain.Step]
        public let document: FlowDocument?

        /// What the chain decided for one placement, `steps` being every tier tried;
        /// `start` is when the walk began (the outcome's milliseconds).
        public init(
            _ placement: String, for identity: Identity, steps: [TierChain.Step], decision: TierChain.Decision,
            mediaWarmed: Bool = false, since start: ContinuousClock.Instant = .now
        ) {
            outcome = PrefetchOutcome(identity, placement, decision, mediaWarmed: mediaWarmed, since: start)
            self.steps = steps
            document = decision.document
        }

        /// The live resolve's request, if one was made, and whether it reached the backend.
        public var reach: BackendReach {
            var reach = BackendReach()
            for step in steps {
                switch step {
                case .liveFailed(let failure): reach.record(failure)
                case .liveFlow, .liveFlowUnstored, .liveNoFlow: reach.record(nil)
                default: break
                }
            }
            return reach
        }
    }

    /// Prefetches placements for one identity: input de-duplicated, every key
    /// concurrently, one batch request for two or more live resolves; the
    /// outcomes once every flow written is durable. Both phases of `answer`.
    public func prefetch(_ placements: [String], for identity: Identity) async -> [PrefetchOutcome] {
        await answer(placements, for: identity).outcomes()
    }

    /// The first phase of a prefetch: the cache looked up and the live
    /// requests answered (or the resolveTimeout passed); their flows are
    /// being written. A warm gives the identity's place among those
    /// resolving to the next one here; the second phase, `outcomes()`, waits
    /// for the writes and their group commit, and downloads images: a fresh
    /// cache hit's as well as a live flow's, all at once, so a cached
    /// placement's images never hold back a live placement's request, and
    /// every placement has the same `resolveTimeout` from the start.
    public func answer(_ placements: [String], for identity: Identity) async -> AnsweredPrefetch {
        let begun = begin(placements, for: identity)
        var landings: [(Int, LiveLanding?)] = []
        landings.reserveCapacity(begun.calls.count)
        // A batch's answers all come at once: waiting for each in turn costs no more.
        for (index, call) in zip(begun.needLive, begun.calls) {
            landings.append((index, await live.answer(call, until: begun.deadline)))
        }
        return AnsweredPrefetch(
            warmer: self, identity: identity, keys: begun.keys, cached: begun.cached,
            cachedWithImages: begun.cachedWithImages, landings: landings, start: begun.start, deadline: begun.deadline)
    }

    /// A prefetch up to its live requests: the placements de-duplicated,
    /// the cache looked up, the live resolves started or joined.
    struct Begun {
        let keys: [String]
        let start: ContinuousClock.Instant
        let deadline: ContinuousClock.Instant
        /// Each fresh cache hit's outcome, by its key's position, where there are no images to download.
        let cached: [PrefetchOutcome?]
        /// Each fresh cache hit (its key's position) whose images `--media` asks for.
        let cachedWithImages: [(Int, TierChain.Served)]
        /// The positions of the keys resolved live, and their calls.
        let needLive: [Int]
        let calls: [LiveCall]
    }

    func begin(_ placements: [String], for identity: Identity) -> Begun {
        // De-duplicated in order, by bytes (two spellings of a name are two placements); a prefetch asks for a
        // few placements, so by looking back.
        var keys: [String] = []
        keys.reserveCapacity(placements.count)
        for placement in placements where !keys.contains(where: { $0.sameBytes(as: placement) }) {
            keys.append(placement)
        }
        let start = ContinuousClock.now
        var cached = [PrefetchOutcome?](repeating: nil, count: keys.count)
        var cachedWithImages: [(Int, TierChain.Served)] = []
        var needLive: [Int] = []
        for (index, key) in keys.enumerated() {
            if case (_, .serve(let served)?) = TierChain.cached(
                store.lookupFlow(placement: key, identity: identity), now: config.currentTime)
            {
                // Its images wait for the second phase, beside the live placements'.
                if config.media == .none {
                    cached[index] = PrefetchOutcome(identity, key, .serve(served), mediaWarmed: false, since: start)
                } else {
                    cachedWithImages.append((index, served))
                }
            } else {
                needLive.append(index)
            }
        }
        let calls = live.start(needLive.map { keys[$0] }, for: identity)
        return Begun(
            keys: keys, start: start, deadline: start + config.resolveTimeout, cached: cached,
            cachedWithImages: cachedWithImages, needLive: needLive, calls: calls)
    }

    /// Both phases of a prefetch with no task of its own, for a warm with
    /// nothing to download (`--media none`): `answered` once every live
    /// placement is answered or the resolveTimeout passed, then `finished`
    /// with the outcomes once each flow is durable or the time passed. Each
    /// is called once, in that order, on whichever thread gets there (a
    /// resolve's, the group commit's, the timeout clock's): the same
    /// outcomes `answer` and `outcomes()` give, without a task waiting.
    func prefetch(
        _ placements: [String], for identity: Identity, answered: @escaping @Sendable () -> Void,
        finished: @escaping @Sendable ([PrefetchOutcome]) -> Void
    ) {
        precondition(config.media == .none, "a prefetch that downloads images waits in a task (answer, outcomes)")
        TaskFreePrefetch(warmer: self, identity: identity, begun: begin(placements, for: identity))
            .run(answered: answered, finished: finished)
    }

    /// One identity's prefetch between its two phases (`Warmer.answer`).
    public struct AnsweredPrefetch: Sendable {
        let warmer: Warmer
        let identity: Identity
        let keys: [String]
        /// Each fresh cache hit's outcome, by its key's position, where there are no images to download.
        let cached: [PrefetchOutcome?]
        /// Each fresh cache hit (its key's position) whose images `--media` asks for, not yet looked at.
        let cachedWithImages: [(Int, TierChain.Served)]
        /// Each live placement's answer (its key's position), nil when none came before the deadline.
        let landings: [(Int, LiveLanding?)]
        let start: ContinuousClock.Instant
        let deadline: ContinuousClock.Instant

        /// The second phase: each placement's outcome, in the order asked,
        /// once its flow is durable (or the resolveTimeout passed), its images
        /// downloaded when `--media` asks for them (a cache hit's too).
        public func outcomes() async -> [PrefetchOutcome] {
            var outcomes = cached
            if warmer.config.media == .none {
                // Nothing to download: each in turn, with no task per placement.
                for (index, landing) in landings {
                    outcomes[index] = await warmer.finish(keys[index], identity, landing, start, until: deadline)
                        .outcome
                }
            } else {
                await withTaskGroup(of: (Int, PrefetchOutcome).self) { group in
                    for (index, served) in cachedWithImages {
                        group.addTask { (index, await warmer.cachedOutcome(keys[index], identity, served, start)) }
                    }
                    for (index, landing) in landings {
                        group.addTask {
                            (index, await warmer.finish(keys[index], identity, landing, start, until: deadline).outcome)
                        }
                    }
                    for await (index, outcome) in group { outcomes[index] = outcome }
                }
            }
            return outcomes.compactMap { $0 }
        }
    }

    /// A fresh cache hit's outcome, its images downloaded first when `--media` asks.
    fileprivate func cachedOutcome(
        _ placement: String, _ identity: Identity, _ served: TierChain.Served, _ start: ContinuousClock.Instant
    ) async -> PrefetchOutcome {
        let mediaWarmed = await media.warmImages(
            of: served.document, config.media, until: start + config.resolveTimeout + config.mediaGrace)
        return PrefetchOutcome(identity, placement, .serve(served), mediaWarmed: mediaWarmed, since: start)
    }

    /// isPlacementReady, with the reason when not: a fresh cache hit, else a
    /// live resolve that leaves the flow warm (the bundled default and stale
    /// copies do not count); when not, the live resolve's failure (nil when
    /// the backend answered that it has no flow).
    public enum Readiness: Sendable {
        case ready
        /// The backend has a flow, but the cache could not keep it (`reason`).
        case readyUnstored(reason: String)
        case notReady(ResolveFailure?)
    }

    public func readiness(_ placement: String, for identity: Identity) async -> Readiness {
        if case (_, .serve?) = TierChain.cached(
            store.lookupFlow(placement: placement, identity: identity), now: config.currentTime)
        {
            return .ready
        }
        switch await live.wait(live.start(placement, for: identity), until: callerDeadline(from: .now)) {
        case .success(.flow): return .ready
        case .success(.unstored(_, _, let reason)): return .readyUnstored(reason: reason)
        case .success(.failed(let failure)), .failure(let failure): return .notReady(failure)
        case .success: return .notReady(nil)
        }
    }

    /// How long past its deadline a caller waits for a request limited to
    /// that deadline (`ResolveClient.requestLimit`) to end, as it will: the
    /// event loop's latency, bounded.
    static let requestEndSlack: Duration = .seconds(5)

    /// A one-shot caller's deadline: the resolveTimeout from `start`; with a
    /// request limited to it (`ResolveClient.requestLimit`), which ends by
    /// then on its own, the request's end, not a race with it, says whether
    /// it reached the backend.
    private func callerDeadline(from start: ContinuousClock.Instant) -> ContinuousClock.Instant {
        start + config.resolveTimeout + (live.client.requestLimit == nil ? .zero : Self.requestEndSlack)
    }

    /// One placement through the chain, saying what each tier found (`fpctl resolve`).
    public func resolve(_ placement: String, for identity: Identity) async -> Resolution {
        let start = ContinuousClock.now
        let (step, decision) = TierChain.cached(
            store.lookupFlow(placement: placement, identity: identity), now: config.currentTime)
        if let decision {
            return Resolution(placement, for: identity, steps: [step], decision: decision, since: start)
        }
        let deadline = callerDeadline(from: start)
        let landing = await live.answer(live.start(placement, for: identity), until: deadline)
        return await finish(
            placement, identity, landing, start, cacheStep: step, warmMedia: false, until: deadline,
            serveUnstored: true)
    }

    /// Waits (up to `grace`) for live resolves whose callers timed out and for
    /// font downloads, then points every alias still pending at its newest entry
    /// (`AliasWriter`); says how many resolves landed and how many were still running.
    public func waitForLateResolves(grace: Duration) async -> LateResolves {
        let deadline = ContinuousClock.now + grace
        await media.waitForFonts(until: deadline)
        return await live.waitForLate(until: deadline)
    }

    /// Seals what this process wrote to a format-2 cache (`CacheStore.finishWriting`): a run's last act.
    public func finishWriting() { store.finishWriting() }

    /// A stopped run's end, within the stop's bound: no wait for late
    /// resolves, but the aliases pointed and the segment sealed as at a
    /// normal end (`waitForLateResolves` does both after its wait).
    public func finishStopped() { live.finish() }

    /// Every HTTP request made so far (resolves, batches, media), by endpoint and status.
    public var requests: RequestCounts { live.client.requests }
    /// The run's request pacing: its rate limit and the time requests waited for it.
    public var pacer: RequestPacer { live.client.pacer }

    /// Live requests made so far, and whether any reached the backend.
    public var reach: BackendReach { live.reach }

    /// Tiers 1 to 3 for a placement whose live resolve answered with `landing`
    /// (nil: no answer in time), once its flow is durable.
    fileprivate func finish(
        _ placement: String, _ identity: Identity, _ landing: LiveLanding?, _ start: ContinuousClock.Instant,
        cacheStep: TierChain.Step? = nil, warmMedia: Bool = true, until deadline: ContinuousClock.Instant? = nil,
        serveUnstored: Bool = false
    ) async -> Resolution {
        let (steps, decision) = chain(
            placement, identity, await live.result(landing, until: deadline), serveUnstored: serveUnstored)
        var mediaWarmed = false
        if warmMedia, case .serve(let served) = decision, served.tier == .network {
            mediaWarmed = await media.warmImages(
                of: served.document, config.media, until: start + config.resolveTimeout + config.mediaGrace)
        }
        return Resolution(
            placement, for: identity, steps: cacheStep.map { [$0] + steps } ?? steps, decision: decision,
            mediaWarmed: mediaWarmed, since: start)
    }
}

extension Warmer {
    /// Tiers 1 to 3 for a placement whose live resolve gave `result` (a timeout is a failure).
    fileprivate func chain(
        _ placement: String, _ identity: Identity, _ result: Result<LiveResult, ResolveFailure>,
        serveUnstored: Bool = false
    ) -> ([TierChain.Step], TierChain.Decision) {
        TierChain.afterLive(
            result, defaultTTL: config.environment.defaultTTL,
            stale: {
                store.lookupFlow(placement: placement, identity: identity) ?? store.lookupAlias(placement: placement)
            },
            bundled: { bundle?.flows[placement]?.document }, bundleGiven: bundle != nil, serveUnstored: serveUnstored)
    }

    /// `Warmer.prefetch(_:for:answered:finished:)`: one identity's landings
    /// and results gathered as they come, the deadline one timer, each
    /// phase ended once, by the last to arrive or by the timer.
    fileprivate final class TaskFreePrefetch: Sendable {
        private enum Phase {
            case answering, writing, done
        }

        private struct State {
            var phase = Phase.answering
            /// Each live placement's landing (nil until it comes; nil at the deadline: no answer).
            var landings: [LiveLanding?]
            var answersLeft: Int
            /// Each landed placement's result once durable.
            var results: [LiveResult?]
            var resultsLeft = 0
            var timer: TimeoutClock.Token?
            var answered: (@Sendable () -> Void)?
            var finished: (@Sendable ([PrefetchOutcome]) -> Void)?
        }

        let warmer: Warmer
        let identity: Identity
        let begun: Begun
        private let state: Mutex<State>

        init(warmer: Warmer, identity: Identity, begun: Begun) {
            (self.warmer, self.identity, self.begun) = (warmer, identity, begun)
            let count = begun.calls.count
            state = Mutex(
                State(
                    landings: Array(repeating: nil, count: count), answersLeft: count,
                    results: Array(repeating: nil, count: count)))
        }

        func run(answered: @escaping @Sendable () -> Void, finished: @escaping @Sendable ([PrefetchOutcome]) -> Void) {
            guard !begun.calls.isEmpty else {
                answered()
                return finished(begun.cached.compactMap { $0 })
            }
            let limit = max(.zero, ContinuousClock.now.duration(to: begun.deadline))
            state.withLock { state in
                (state.answered, state.finished) = (answered, finished)
                state.timer = TimeoutClock.shared.schedule(after: limit) { [self] in timedOut() }
            }
            for (n, call) in begun.calls.enumerated() {
                call.landing.whenFulfilled { [self] landing in landed(n, landing) }
            }
        }

        private func landed(_ n: Int, _ landing: LiveLanding) {
            let ready = state.withLock { state -> Bool in
                guard state.phase == .answering, state.landings[n] == nil else { return false }
                state.landings[n] = landing
                state.answersLeft -= 1
                guard state.answersLeft == 0 else { return false }
                enterWriting(&state)
                return true
            }
            guard ready else { return }
            for (n, landing) in state.withLock({ $0.landings }).enumerated() {
                landing?.whenDurable { [self] result in self.durable(n, result) }
            }
        }

        /// Every answer is in: `answered` is told (under the lock, so
        /// `finished` can only follow it) and the results are awaited.
        private func enterWriting(_ state: inout State) {
            state.phase = .writing
            state.resultsLeft = state.landings.count
            state.answered?()
            state.answered = nil
        }

        private func durable(_ n: Int, _ result: LiveResult) {
            let done = state.withLock { state -> State? in
                guard state.phase == .writing, state.results[n] == nil else { return nil }
                state.results[n] = result
                state.resultsLeft -= 1
                guard state.resultsLeft == 0 else { return nil }
                state.phase = .done
                return state
            }
            guard let done else { return }
            if let timer = done.timer { TimeoutClock.shared.cancel(timer) }
            finish(done)
        }

        /// The deadline: a placement with no answer, or whose flow is not
        /// durable yet, is remembered as late and fails with a timeout, as
        /// `LiveResolver.answer` and `result` do when their time is up.
        private func timedOut() {
            let done = state.withLock { state -> State? in
                switch state.phase {
                case .done: return nil
                case .answering: enterWriting(&state)
                case .writing: break
                }
                state.phase = .done
                return state
            }
            guard var done else { return }
            // Handed on: the clock's task only fires limits; the chain may read the cache (a stale copy).
            Task { [self] in
                for n in done.landings.indices where done.landings[n] == nil {
                    done.landings[n] = warmer.live.unanswered(begun.calls[n])
                }
                finish(done)
            }
        }

        private func finish(_ done: State) {
            var outcomes = begun.cached
            let live = warmer.live
            for (n, index) in begun.needLive.enumerated() {
                let result: Result<LiveResult, ResolveFailure>
                if let durable = done.results[n] {
                    result = .success(durable)
                } else if let landing = done.landings[n] {
                    // An answer from a request that failed before the deadline is durable at once.
                    result = landing.durableIfReady.map { .success($0) } ?? live.undurable(landing)
                } else {
                    result = .failure(live.timeout)
                }
                let key = begun.keys[index]
                let (steps, decision) = warmer.chain(key, identity, result)
                outcomes[index] =
                    Resolution(key, for: identity, steps: steps, decision: decision, since: begun.start).outcome
            }
            done.finished?(outcomes.compactMap { $0 })
        }
    }
}

extension TierChain.Decision {
    /// The flow served, if any.
    public var document: FlowDocument? {
        if case .serve(let served) = self { return served.document }
        return nil
    }
}
