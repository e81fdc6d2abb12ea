import Foundation
import Synchronization

/// Tier 1 for a run: live resolves shared per (placement, fingerprint), one
/// batch request per identity for two or more placements (per-placement
/// requests once the backend shows it has no batch endpoint, for the rest of
/// the run), and every validated flow landing in the cache whether or not its
/// caller still waits. A caller that gives up at its resolveTimeout leaves the
/// request running; `waitForLate` lets a batch job wait for those.
final class LiveResolver: Sendable {
    /// A resolve's key, hashed once when made: the pool looks each key up
    /// several times, and hashing a 64-digit fingerprint every time cost
    /// more than the lookups.
    struct Key: Hashable, Sendable {
        let placement: String
        let fingerprint: String
        private let digest: Int

        init(placement: String, fingerprint: String) {
            (self.placement, self.fingerprint) = (placement, fingerprint)
            var hasher = Hasher()
            hasher.combine(placement)
            hasher.combine(fingerprint)
            digest = hasher.finalize()
        }

        func hash(into hasher: inout Hasher) { hasher.combine(digest) }

        static func == (a: Key, b: Key) -> Bool {
            a.digest == b.digest && a.fingerprint == b.fingerprint && a.placement == b.placement
        }
    }

    let client: ResolveClient
    let store: CacheStore
    let media: MediaWarmer
    let config: WarmConfiguration
    let aliases: AliasWriter
    private let pool = InflightPool<Key, LiveLanding>()
    private let state = Mutex<(reach: BackendReach, batchUnavailable: Bool, late: [Late])>((BackendReach(), false, []))

    /// A resolve whose caller stopped waiting: before its answer, or before its flow was durable.
    private enum Late {
        case answer(Pending<LiveLanding>)
        case durable(Pending<LiveResult>)
    }

    init(client: ResolveClient, store: CacheStore, media: MediaWarmer, config: WarmConfiguration) {
        self.client = client
        self.store = store
        self.media = media
        self.config = config
        self.aliases = AliasWriter(store: store)
    }

    /// The live requests made so far, and whether any reached the backend.
    var reach: BackendReach { state.withLock { $0.reach } }

    /// The live resolve of each placement for `identity`: joined when one is
    /// running, else started: together, as one task making one batch request
    /// and staging every flow in one trip, when two or more start and the
    /// backend has a batch endpoint; else a task each. Every placement gets a
    /// landing to come: its answer as soon as it is read, with its result
    /// once its flow is written and durable (`CacheStore.stage`, then `durable`).
    func start(_ placements: [String], for identity: Identity) -> [String: Pending<LiveLanding>] {
        let fingerprint = identity.fingerprint
        let keys = placements.map { Key(placement: $0, fingerprint: fingerprint) }
        let values = pool.values(for: keys) { missing, deliver in
            let batchable = missing.count >= 2 && config.batch && !state.withLock { $0.batchUnavailable }
            guard batchable else {
                for key in missing {
                    Task {
                        let result = await self.resolveOne(key.placement, identity)
                        await self.land([(key.placement, result)], identity) { deliver(key, $0[0]) }
                    }
                }
                return
            }
            Task {
                let results = await self.resolveBatch(missing.map(\.placement), identity)
                await self.land(
                    missing.map {
                        ($0.placement, results[$0.placement] ?? .failed(.missingResult(placement: $0.placement)))
                    },
                    identity
                ) { landings in
                    for (key, landing) in zip(missing, landings) { deliver(key, landing) }
                }
            }
        }
        return Dictionary(uniqueKeysWithValues: values.map { ($0.key.placement, $0.value) })
    }

    /// The live resolve of one placement, joined or started.
    func start(_ placement: String, for identity: Identity) -> Pending<LiveLanding> {
        // One placement is never batched: this starts or joins its own request.
        let started = start([placement], for: identity)
        // `start` gives every placement a landing to come; this is never reached.
        return started[placement] ?? Pending.run { LiveLanding(.failed(.missingResult(placement: placement))) }
    }

    /// The first phase: the resolve's answer, its flow not yet written, before
    /// `deadline` (or within the resolveTimeout); nil when it passes first,
    /// the resolve left running and remembered for `waitForLate`.
    func answer(
        _ resolve: Pending<LiveLanding>, until deadline: ContinuousClock.Instant? = nil
    ) async -> LiveLanding? {
        if let landing = await resolve.value(within: limit(deadline)) { return landing }
        state.withLock { $0.late.append(.answer(resolve)) }
        return nil
    }

    /// The second phase: the landing's result once its flow is durable,
    /// before `deadline`; a timeout (`answer` gave nil, or the commit took
    /// too long) leaves it running and remembered for `waitForLate`.
    func result(
        _ landing: LiveLanding?, until deadline: ContinuousClock.Instant? = nil
    ) async -> Result<LiveResult, ResolveFailure> {
        let timeout = ResolveFailure.timeout("no answer within \(config.resolveTimeout)")
        guard let landing else { return .failure(timeout) }
        if let result = await landing.durable.value(within: limit(deadline)) { return .success(result) }
        state.withLock { $0.late.append(.durable(landing.durable)) }
        return .failure(timeout)
    }

    /// Both phases: the resolve's result once durable, within the resolveTimeout (or until `deadline`).
    func wait(
        _ resolve: Pending<LiveLanding>, until deadline: ContinuousClock.Instant? = nil
    ) async -> Result<LiveResult, ResolveFailure> {
        let deadline = deadline ?? .now + config.resolveTimeout
        return await result(await answer(resolve, until: deadline), until: deadline)
    }

    private func limit(_ deadline: ContinuousClock.Instant?) -> Duration {
        deadline.map { max(.zero, ContinuousClock.now.duration(to: $0)) } ?? config.resolveTimeout
    }

    /// Waits until `deadline` for resolves whose callers timed out: how many
    /// landed, how many were still running.
    func waitForLate(until deadline: ContinuousClock.Instant) async -> (landed: Int, pending: Int) {
        let late = state.withLock { state in
            defer { state.late = [] }
            return state.late
        }
        var landed = 0
        for resolve in late {
            guard deadline > .now else { break }
            let durable: Pending<LiveResult>?
            switch resolve {
            case .answer(let answer): durable = await answer.value(within: deadline - .now)?.durable
            case .durable(let pending): durable = pending
            }
            guard let durable, deadline > .now else { continue }
            if await durable.value(within: deadline - .now) != nil { landed += 1 }
        }
        aliases.flush()
        return (landed, late.count - landed)
    }

    private func resolveOne(_ placement: String, _ identity: Identity) async -> LiveResult {
        let result = await client.resolve(placement, identity)
        state.withLock { $0.reach.record(result.failure) }
        return result
    }

    private func resolveBatch(_ placements: [String], _ identity: Identity) async -> [String: LiveResult] {
        do {
            let results = try await client.resolveBatch(placements, identity)
            // The batch got no answer when none of its keys did.
            let failures = results.values.map(\.failure)
            let unanswered = failures.allSatisfy { $0?.isUnavailable == true }
            state.withLock { $0.reach.record(unanswered ? failures.first ?? nil : nil) }
            return results
        } catch {
            // 404/405/501: no batch endpoint; remember it for the rest of the run.
            state.withLock { state in
                state.reach.record(nil)
                state.batchUnavailable = true
            }
            return await withTaskGroup(of: (String, LiveResult).self) { group in
                for placement in placements {
                    group.addTask { (placement, await self.resolveOne(placement, identity)) }
                }
                var results: [String: LiveResult] = [:]
                for await (placement, result) in group { results[placement] = result }
                return results
            }
        }
    }

    /// The results of one identity's placements landing together: the
    /// landings handed to `answered` as soon as the answer is read, then
    /// each validated flow staged (all in one trip) and, once every flow is
    /// durable or failed, each landing's result given, its alias pointed and
    /// its fonts started. A flow that cannot be written is a failure
    /// (`cache-write`): nothing was warmed.
    private func land(
        _ results: [(String, LiveResult)], _ identity: Identity, answered: ([LiveLanding]) -> Void
    ) async {
        var flows: [(placement: String, document: FlowDocument, ttlSeconds: Int)] = []
        for (placement, result) in results {
            if case .flow(let document, let ttl) = result {
                flows.append((placement, document, ttl ?? config.environment.defaultTTL))
            }
        }
        // The answers go to their callers first: a warm's next request need not wait for this disk.
        let landings = results.map { LiveLanding($0.1, durable: Pending()) }
        answered(landings)
        let staged = await store.stage(
            flows, identity: identity, tier: .network, resolvedAt: config.currentTime, commit: .shared)
        var stored = await staged.durable.makeIterator()
        for landing in landings {
            guard case .flow(let document, let ttl) = landing.answer, let outcome = stored.next() else {
                landing.durable.fulfil(landing.answer)
                continue
            }
            switch outcome {
            case .success(let entry):
                aliases.stored(entry)
                media.startFonts(of: document)
                landing.durable.fulfil(landing.answer)
            case .failure(let error):
                landing.durable.fulfil(
                    .unstored(
                        document, ttlSeconds: ttl ?? config.environment.defaultTTL,
                        reason: "the flow could not be written to the cache: \(error)"))
            }
        }
    }
}

/// One placement's live resolve in its two phases: the backend's answer
/// (`answer`), and the result once its flow is written and durable
/// (`durable`: the answer, or `.unstored` when the flow could not be written).
struct LiveLanding: Sendable {
    let answer: LiveResult
    let durable: Pending<LiveResult>

    init(_ answer: LiveResult, durable: Pending<LiveResult>) {
        (self.answer, self.durable) = (answer, durable)
    }

    /// An answer with nothing to write: its result is the answer.
    init(_ answer: LiveResult) {
        self.answer = answer
        durable = Pending()
        durable.fulfil(answer)
    }
}
