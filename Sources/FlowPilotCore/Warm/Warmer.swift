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
    /// The image phases running (`IdentityPrefetch`'s one task each), so
    /// that a stop reaches them; and whether the run stopped.
    private let imagePhases = Mutex<(next: UInt64, running: [UInt64: Task<Void, Never>], stopped: Bool)>(
        (0, [:], false))

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
    /// outcomes once every flow written is durable and its images (as
    /// `--media` asks) downloaded. An adapter: the one engine is
    /// `prefetch(_:for:answered:finished:)`, whose outcomes this awaits.
    public func prefetch(_ placements: [String], for identity: Identity) async -> [PrefetchOutcome] {
        let outcomes = Pending<[PrefetchOutcome]>()
        prefetch(placements, for: identity, answered: {}, finished: { outcomes.fulfil($0) })
        return await outcomes.value
    }

    /// A prefetch up to its live requests: the placements de-duplicated,
    /// the cache looked up, the live resolves started or joined.
    struct Begun {
        let keys: [String]
        let start: ContinuousClock.Instant
        let deadline: ContinuousClock.Instant
        /// Each fresh cache hit, by its key's position, where there are no images to download.
        let cached: [Resolution?]
        /// Each fresh cache hit (its key's position) whose images `--media` asks for, and what Tier 0 found.
        let cachedWithImages: [(Int, TierChain.Served, TierChain.Step)]
        /// The positions of the keys resolved live, what Tier 0 found of each (no entry, or a stale one: kept
        /// for `resolve`, which shows it), and their calls.
        let needLive: [Int]
        let cacheSteps: [TierChain.Step]
        let calls: [LiveCall]
        /// `resolve`'s prefetch: a flow the cache could not keep still served, every step kept to be shown,
        /// no images downloaded.
        let forResolve: Bool
        /// Whether the images of the flows served are downloaded: a warm's, as `--media` asks.
        let warmsImages: Bool
    }

    /// The placements looked up together (`CacheStore.lookupFlows`), then
    /// the live resolves of those missed started or joined, looking again at
    /// any whose request landed in between (`InflightPool.epoch`).
    /// `lookedUp` runs between the two (a test holds a prefetch there).
    func begin(
        _ placements: [String], for identity: Identity, deadline: ContinuousClock.Instant? = nil,
        forResolve: Bool = false, lookedUp: () -> Void = {}
    ) -> Begun {
        let warmsImages = !forResolve && config.media != .none
        // De-duplicated in order, by bytes (two spellings of a name are two placements); a prefetch asks for a
        // few placements, so by looking back.
        var keys: [String] = []
        keys.reserveCapacity(placements.count)
        for placement in placements where !keys.contains(where: { $0.sameBytes(as: placement) }) {
            keys.append(placement)
        }
        let start = ContinuousClock.now
        var cached = [Resolution?](repeating: nil, count: keys.count)
        var cachedWithImages: [(Int, TierChain.Served, TierChain.Step)] = []
        var needLive: [Int] = []
        needLive.reserveCapacity(keys.count)
        var cacheSteps: [TierChain.Step] = []
        if forResolve { cacheSteps.reserveCapacity(keys.count) }
        // Read before the lookups: a request for one of these keys that lands after them is not made again.
        var epoch = live.epoch
        for (index, found) in store.lookupFlows(keys, identity: identity).enumerated() {
            guard
                let step = lookUp(
                    keys, index, found, identity, start, warmsImages, cached: &cached,
                    cachedWithImages: &cachedWithImages)
            else { continue }
            needLive.append(index)
            if forResolve { cacheSteps.append(step) }
        }
        lookedUp()
        var calls = live.start(needLive.map { keys[$0] }, for: identity, since: epoch)
        // A request for a key missed above landed in between (another caller's, sharing it): look again.
        while calls.contains(where: { $0 == nil }) {
            epoch = live.epoch
            var (stillLive, stillCalls, stillSteps, again): ([Int], [LiveCall?], [TierChain.Step], [Int]) = (
                [], [], [], []
            )
            for (n, index) in needLive.enumerated() {
                var step = forResolve ? cacheSteps[n] : nil
                if calls[n] == nil {
                    // Served from the cache now: no longer live.
                    guard
                        let missed = lookUp(
                            keys, index, store.lookupFlow(placement: keys[index], identity: identity), identity,
                            start, warmsImages, cached: &cached, cachedWithImages: &cachedWithImages)
                    else { continue }
                    step = missed
                    again.append(stillLive.count)
                }
                stillLive.append(index)
                stillCalls.append(calls[n])
                if let step { stillSteps.append(step) }
            }
            (needLive, calls, cacheSteps) = (stillLive, stillCalls, stillSteps)
            let restarted = live.start(again.map { keys[needLive[$0]] }, for: identity, since: epoch)
            for (n, call) in zip(again, restarted) { calls[n] = call }
            cachedWithImages.sort { $0.0 < $1.0 }
        }
        return Begun(
            keys: keys, start: start, deadline: deadline ?? start + config.resolveTimeout, cached: cached,
            cachedWithImages: cachedWithImages, needLive: needLive, cacheSteps: cacheSteps,
            calls: calls.compactMap { $0 },
            forResolve: forResolve, warmsImages: warmsImages)
    }

    /// Tier 0 for `keys[index]`, given what the cache holds of it (`found`):
    /// a fresh hit is set aside (in `cached`, or in `cachedWithImages` when
    /// its images wait for the last phase, beside the live placements') and
    /// gives nil; a miss gives its step.
    private func lookUp(
        _ keys: [String], _ index: Int, _ found: (CachedFlow, FlowDocument)?, _ identity: Identity,
        _ start: ContinuousClock.Instant, _ warmsImages: Bool, cached: inout [Resolution?],
        cachedWithImages: inout [(Int, TierChain.Served, TierChain.Step)]
    ) -> TierChain.Step? {
        let (step, decision) = TierChain.cached(found, now: config.currentTime)
        guard case .serve(let served)? = decision else { return step }
        if !warmsImages {
            cached[index] = Resolution(
                keys[index], for: identity, steps: [step], decision: .serve(served), since: start)
        } else {
            cachedWithImages.append((index, served, step))
        }
        return nil
    }

    /// The one engine of a prefetch, whatever `--media` is (`IdentityPrefetch`):
    /// `answered` once every live placement is answered or the resolveTimeout
    /// passed (its place among those resolving can go to the next identity),
    /// then `finished` with the outcomes, in the order asked, once each flow
    /// is durable or the time passed and, when `--media` asks, the images of
    /// each flow warmed downloaded (a fresh cache hit's too, all at once).
    /// Each is called once, in that order, on whichever thread gets there (a
    /// resolve's, the group commit's, the timeout clock's, a blocking-I/O
    /// thread where the chain reads the cache); no task waits for the
    /// resolves, and one runs the image downloads, when there are any.
    func prefetch(
        _ placements: [String], for identity: Identity, answered: @escaping @Sendable () -> Void,
        finished: @escaping @Sendable ([PrefetchOutcome]) -> Void
    ) {
        IdentityPrefetch(warmer: self, identity: identity, begun: begin(placements, for: identity))
            .run(answered: answered, finished: .outcomes(finished))
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
        // The chain's first answer decides: a fresh hit or a live flow is ready, anything else is not.
        for step in await resolve(placement, for: identity).steps {
            switch step {
            case .freshHit, .liveFlow: return .ready
            case .liveFlowUnstored(_, let reason): return .readyUnstored(reason: reason)
            case .liveFailed(let failure): return .notReady(failure)
            case .liveNoFlow: return .notReady(nil)
            default: continue
            }
        }
        return .notReady(nil)
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

    /// One placement through the chain, saying what each tier found (`fpctl
    /// resolve`, `ready`): the prefetch's engine with one placement, its
    /// deadline the caller's, a flow the cache could not keep still shown,
    /// no images downloaded.
    public func resolve(_ placement: String, for identity: Identity) async -> Resolution {
        let begun = begin([placement], for: identity, deadline: callerDeadline(from: .now), forResolve: true)
        let resolutions = Pending<[Resolution]>()
        IdentityPrefetch(warmer: self, identity: identity, begun: begun)
            .run(answered: {}, finished: .resolutions({ resolutions.fulfil($0) }))
        return await resolutions.value[0]
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
    public func finishStopped() {
        // Each identity downloading images stops waiting for them now (the downloads, shared by URL, end
        // by their own deadline); its prefetch then ends as at its deadline.
        let phases = imagePhases.withLock { phases in
            phases.stopped = true
            defer { phases.running = [:] }
            return Array(phases.running.values)
        }
        for phase in phases { phase.cancel() }
        live.finish()
    }

    /// Runs an identity's image phase as a task a stop reaches (`finishStopped`).
    func imagePhase(_ work: @escaping @Sendable () async -> Void) {
        imagePhases.withLock { phases in
            let number = phases.next
            phases.next += 1
            let task = Task { [self] in
                await work()
                imagePhases.withLock { _ = $0.running.removeValue(forKey: number) }
            }
            if phases.stopped { task.cancel() } else { phases.running[number] = task }
        }
    }

    /// How many identities are downloading images now (tests).
    var imagePhasesRunning: Int { imagePhases.withLock { $0.running.count } }

    /// Every HTTP request made so far (resolves, batches, media), by endpoint and status.
    public var requests: RequestCounts { live.client.requests }
    /// The run's request pacing: its rate limit and the time requests waited for it.
    public var pacer: RequestPacer { live.client.pacer }

    /// Live requests made so far, and whether any reached the backend.
    public var reach: BackendReach { live.reach }
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

    /// Whether the chain, given `result`, reads the cache (Tier 2, this
    /// identity's stale entry or the placement's alias): a live failure
    /// other than the cache's own.
    fileprivate static func readsCache(_ result: Result<LiveResult, ResolveFailure>) -> Bool {
        switch result {
        case .success(.failed(.cacheWrite)), .failure(.cacheWrite): false
        case .success(.failed), .failure: true
        case .success: false
        }
    }

    /// The one engine of a prefetch (`Warmer.prefetch(_:for:answered:finished:)`,
    /// and through it the async `prefetch`, `resolve` and `readiness`): one
    /// identity's placements from their cache lookups (`begin`) to their
    /// outcomes, as a state machine driven by callbacks, one deadline (one
    /// timer) for every placement.
    ///
    /// Phases: **answering** (each live placement's landing, or the
    /// deadline), **writing** (each landed flow durable, or the deadline),
    /// then **deciding** (Tiers 1 to 3 for each: `chain`, on a blocking-I/O
    /// thread whenever it reads the cache, never on the group commit's) and,
    /// when `--media` asks, **images** (one task downloads the images of
    /// every flow served fresh from the cache or warmed live, all at once,
    /// within the resolveTimeout plus the media grace). The timeout and late
    /// rules are `LiveResolver.unanswered` and `undurable`, called here only.
    /// `answered` is called once, outside the lock, and always before
    /// `finished`: a deadline that comes while it runs waits for it.
    fileprivate final class IdentityPrefetch: Sendable {
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
            /// `answered` has returned; until it has, a deadline leaves the ending to its caller.
            var answeredCalled = false
            var endAfterAnswered = false
        }

        let warmer: Warmer
        let identity: Identity
        let begun: Begun
        private let state: Mutex<State>
        private let callbacks: Mutex<Callbacks>

        /// Who is told the end: a prefetch its rows, `resolve` each placement's way through the chain.
        enum Finished: Sendable {
            case outcomes(@Sendable ([PrefetchOutcome]) -> Void)
            case resolutions(@Sendable ([Resolution]) -> Void)
        }

        private struct Callbacks {
            var answered: (@Sendable () -> Void)?
            var finished: Finished?
        }

        init(warmer: Warmer, identity: Identity, begun: Begun) {
            (self.warmer, self.identity, self.begun) = (warmer, identity, begun)
            let count = begun.calls.count
            state = Mutex(
                State(
                    landings: Array(repeating: nil, count: count), answersLeft: count,
                    results: Array(repeating: nil, count: count)))
            callbacks = Mutex(Callbacks())
        }

        func run(answered: @escaping @Sendable () -> Void, finished: Finished) {
            callbacks.withLock { $0 = Callbacks(answered: answered, finished: finished) }
            guard !begun.calls.isEmpty else {
                callAnswered()
                return decide([])
            }
            let limit = max(.zero, ContinuousClock.now.duration(to: begun.deadline))
            state.withLock { state in
                state.timer = TimeoutClock.shared.schedule(after: limit) { [self] in timedOut() }
            }
            for (n, call) in begun.calls.enumerated() {
                call.landing.whenFulfilled { [self] landing in landed(n, landing) }
            }
        }

        /// `answered`, once.
        private func callAnswered() {
            let answered = callbacks.withLock { callbacks in
                defer { callbacks.answered = nil }
                return callbacks.answered
            }
            answered?()
        }

        private func landed(_ n: Int, _ landing: LiveLanding) {
            let landings = state.withLock { state -> [LiveLanding?]? in
                guard state.phase == .answering, state.landings[n] == nil else { return nil }
                state.landings[n] = landing
                state.answersLeft -= 1
                guard state.answersLeft == 0 else { return nil }
                state.phase = .writing
                state.resultsLeft = state.landings.count
                return state.landings
            }
            guard let landings else { return }
            callAnswered()
            // A deadline that came while `answered` ran ends the prefetch now, after it.
            let late = state.withLock { state -> State? in
                state.answeredCalled = true
                return state.endAfterAnswered ? state : nil
            }
            if let late { return end(late) }
            for (n, landing) in landings.enumerated() {
                landing?.whenDurable { [self] result in self.durable(n, result) }
            }
        }

        private func durable(_ n: Int, _ result: LiveResult) {
            let done = state.withLock { state -> State? in
                guard state.phase == .writing, state.answeredCalled, state.results[n] == nil else { return nil }
                state.results[n] = result
                state.resultsLeft -= 1
                guard state.resultsLeft == 0 else { return nil }
                state.phase = .done
                return state
            }
            guard let done else { return }
            if let timer = done.timer { TimeoutClock.shared.cancel(timer) }
            end(done)
        }

        /// The deadline: a placement with no answer, or whose flow is not
        /// durable yet, is remembered as late and fails with a timeout
        /// (`LiveResolver.unanswered`, `undurable`).
        private func timedOut() {
            let (done, callAnsweredHere) = state.withLock { state -> (State?, Bool) in
                switch state.phase {
                case .done: return (nil, false)
                case .answering:
                    state.phase = .done
                    return (state, true)
                case .writing:
                    state.phase = .done
                    // `answered` is running on the thread whose landing was the last: it ends the prefetch.
                    guard state.answeredCalled else {
                        state.endAfterAnswered = true
                        return (nil, false)
                    }
                    return (state, false)
                }
            }
            guard let done else { return }
            if callAnsweredHere { callAnswered() }
            end(done)
        }

        /// Every placement's live result, as far as it came by the deadline.
        private func end(_ done: State) {
            let live = warmer.live
            var results: [Result<LiveResult, ResolveFailure>] = []
            for n in begun.needLive.indices {
                if let durable = done.results[n] {
                    results.append(.success(durable))
                } else if let landing = done.landings[n] {
                    // An answer from a request that failed before the deadline is durable at once.
                    results.append(landing.durableIfReady.map { .success($0) } ?? live.undurable(landing))
                } else if let unreached = live.unanswered(begun.calls[n]) {
                    // No answer, and every attempt so far failed before reaching the backend: that failure.
                    results.append(.success(unreached.answer))
                } else {
                    results.append(.failure(live.timeout))
                }
            }
            // The chain may read the cache (a stale copy): never on the group commit's thread or the clock's.
            if results.contains(where: Warmer.readsCache) {
                BlockingIO.submit { [self, results] in decide(results) }
            } else {
                decide(results)
            }
        }

        /// Tiers 1 to 3 for each live placement, then the images, then `finished`.
        private func decide(_ results: [Result<LiveResult, ResolveFailure>]) {
            // Pinned in debug builds (every test): the chain reads the cache only on a blocking-I/O thread.
            assert(
                !results.contains(where: Warmer.readsCache) || BlockingIO.isPoolThread,
                "the chain reads the cache here: a blocking-I/O thread's work, not this thread's")
            var resolutions = begun.cached
            var images: [(index: Int, steps: [TierChain.Step], served: TierChain.Served)] = []
            for (index, served, step) in begun.cachedWithImages { images.append((index, [step], served)) }
            for (n, index) in begun.needLive.enumerated() {
                let key = begun.keys[index]
                let (steps, decision) = warmer.chain(key, identity, results[n], serveUnstored: begun.forResolve)
                // What Tier 0 found heads the steps where they are shown (`resolve`); a warm's rows need none.
                let all = begun.forResolve ? [begun.cacheSteps[n]] + steps : steps
                if begun.warmsImages, case .serve(let served) = decision, served.tier == .network {
                    images.append((index, all, served))
                } else {
                    resolutions[index] = Resolution(
                        key, for: identity, steps: all, decision: decision, since: begun.start)
                }
            }
            guard begun.warmsImages, !images.isEmpty else { return finish(resolutions) }
            // The one task of a prefetch: its images, all at once; a stop reaches it.
            warmer.imagePhase { [self, resolutions, images] in
                var resolutions = resolutions
                let media = warmer.media
                let (strategy, until) = (
                    warmer.config.media, begun.start + warmer.config.resolveTimeout + warmer.config.mediaGrace
                )
                await withTaskGroup(of: (Int, Bool).self) { group in
                    for (n, item) in images.enumerated() {
                        group.addTask { (n, await media.warmImages(of: item.served.document, strategy, until: until)) }
                    }
                    for await (n, warmed) in group {
                        let item = images[n]
                        resolutions[item.index] = Resolution(
                            begun.keys[item.index], for: identity, steps: item.steps, decision: .serve(item.served),
                            mediaWarmed: warmed, since: begun.start)
                    }
                }
                finish(resolutions)
            }
        }

        private func finish(_ resolutions: [Resolution?]) {
            let finished = callbacks.withLock { callbacks in
                defer { callbacks.finished = nil }
                return callbacks.finished
            }
            switch finished {
            case .outcomes(let tell): tell(resolutions.compactMap { $0?.outcome })
            case .resolutions(let tell): tell(resolutions.compactMap { $0 })
            case nil: break
            }
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
