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
            // A fingerprint is a SHA-256 in hex: its first 16 digits spread keys as well as all 64 do.
            var hasher = Hasher()
            hasher.combine(placement)
            var digits = fingerprint
            digits.withUTF8 {
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: $0.prefix(16))))
            }
            digest = hasher.finalize()
        }

        func hash(into hasher: inout Hasher) { hasher.combine(digest) }

        static func == (a: Key, b: Key) -> Bool {
            a.digest == b.digest && a.fingerprint.sameBytes(as: b.fingerprint) && a.placement.sameBytes(as: b.placement)
        }
    }

    let client: ResolveClient
    let store: CacheStore
    let media: MediaWarmer
    let config: WarmConfiguration
    let aliases: AliasWriter
    /// The running resolves, each tagged with its request's attempts (`AttemptLog`).
    private let pool = InflightPool<Key, LiveLanding, AttemptLog>()
    private typealias Claim = InflightPool<Key, LiveLanding, AttemptLog>.Claim
    private let state = Mutex<(reach: BackendReach, batchUnavailable: Bool, late: [Late])>((BackendReach(), false, []))

    /// A resolve whose caller stopped waiting: before its answer, or before its flow was durable.
    private enum Late {
        case answer(Pending<LiveLanding>)
        case durable(LiveLanding)
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
    ///
    /// `since` is the `epoch` read before the caller looked the placements
    /// up in the cache: a placement whose request ended and whose flow went
    /// durable after that look is not started again but given nil, for the
    /// caller to look it up again (its flow is there now).
    func start(_ placements: [String], for identity: Identity, since: UInt64) -> [LiveCall?] {
        let fingerprint = identity.fingerprint
        let keys = placements.map { Key(placement: $0, fingerprint: fingerprint) }
        // One log per request: the batch's for every key it would carry, else one a key.
        let batch = keys.count >= 2 && config.batch && !state.withLock { $0.batchUnavailable }
        let shared = batch ? AttemptLog() : nil
        let (running, claims) = pool.values(for: keys.map { ($0, shared ?? AttemptLog()) }, since: since)
        if batch && claims.count >= 2 {
            // Unstructured on purpose: one batch request shared by every caller of its keys, landing
            // in the cache after a caller's timeout, so no caller's task may own it.
            Task { await self.resolve(claims, identity) }
        } else {
            for claim in claims {
                // Unstructured for the same reason: the request is every caller's of its key.
                Task { await self.resolve([claim], identity) }
            }
        }
        return running.map { $0.map { LiveCall(landing: $0.value, attempts: $0.tag) } }
    }

    /// The releases so far of requests whose flows went durable: read before a cache lookup, given to `start`.
    var epoch: UInt64 { pool.epoch }

    /// The claimed keys' request (a batch for two or more), its answers
    /// delivered to their callers, then their flows landed (`land`).
    private func resolve(_ claims: [Claim], _ identity: Identity) async {
        let log = claims[0].tag
        let placements = claims.map(\.key.placement)
        let results =
            claims.count == 1
            ? [await resolveOne(placements[0], identity, log)]
            : await resolveBatch(placements, identity, log)
        // The answers go to their callers first: a warm's next request need not wait for this disk.
        // One promise for the request's results once durable, each landing reading its own.
        let durable = Pending<[LiveResult]>()
        let landings = results.indices.map { LiveLanding(results[$0], index: $0, of: durable) }
        // Each key stays joinable until its flow is durable: a caller in between (its lookup
        // missed the flow not yet in the cache) joins this landing rather than asking again.
        for (claim, landing) in zip(claims, landings) { pool.fulfil(claim, landing) }
        land(Array(zip(placements, results)), landings, durable, identity) { [pool] in
            for claim in claims { pool.release(claim) }
        }
    }

    /// A live placement with no answer by its prefetch's deadline
    /// (`Warmer.IdentityPrefetch`, the one place this is decided): the call
    /// remembered for `waitForLate`, and, when every attempt that ended so
    /// far failed before reaching the backend (`AttemptLog`), that failure
    /// as its answer, not a timeout: nothing reached the backend (exit 69).
    func unanswered(_ call: LiveCall) -> LiveLanding? {
        let unreached = call.attempts?.claim()
        state.withLock { state in
            state.late.append(.answer(call.landing))
            if let unreached, unreached.first { state.reach.record(unreached.failure) }
        }
        return unreached.map { LiveLanding(.failed($0.failure)) }
    }

    /// A landing whose flow is not durable by its prefetch's deadline: the
    /// landing remembered for `waitForLate`, a timeout.
    func undurable(_ landing: LiveLanding) -> Result<LiveResult, ResolveFailure> {
        state.withLock { $0.late.append(.durable(landing)) }
        return .failure(timeout)
    }

    /// What a placement whose live resolve outlived the resolveTimeout fails with.
    var timeout: ResolveFailure { .timeout("no answer within \(config.resolveTimeout)") }

    /// Waits until `deadline` for resolves whose callers timed out, and
    /// counts them by what happened: a flow durable in the cache, a failure,
    /// an answer without a flow, or still running.
    func waitForLate(until deadline: ContinuousClock.Instant) async -> LateResolves {
        let late = state.withLock { state in
            defer { state.late = [] }
            return state.late
        }
        var counts = LateResolves()
        for resolve in late {
            guard deadline > .now else { break }
            let landing: LiveLanding?
            switch resolve {
            case .answer(let answer): landing = await answer.value(within: deadline - .now)
            case .durable(let waiting): landing = waiting
            }
            guard let landing, deadline > .now, let result = await landing.durable(within: deadline - .now) else {
                continue
            }
            switch result {
            case .flow: counts.landed += 1
            case .noFlow: counts.noFlow += 1
            case .failed, .unstored: counts.failed += 1
            }
        }
        counts.pending = late.count - counts.landed - counts.failed - counts.noFlow
        finish()
        return counts
    }

    /// What ends every run, a stopped one too (with no wait): each
    /// placement's alias pointed at its newest entry, the writer's segment
    /// sealed (docs/cache-format.md, "Writing" and "Aliases").
    func finish() {
        aliases.flush()
        store.finishWriting()
    }

    private func resolveOne(_ placement: String, _ identity: Identity, _ log: AttemptLog) async -> LiveResult {
        let result = await client.resolve(placement, identity, attempts: log)
        record(result.failure, log)
        return result
    }

    /// One request ended with `failure` (nil: it reached the backend), in
    /// the run's `BackendReach`; once only when a caller already counted it
    /// as unanswered at its timeout (`unanswered`).
    private func record(_ failure: ResolveFailure?, _ log: AttemptLog) {
        let reported = log.finish()
        state.withLock { state in
            if reported { state.reach.recordLate(failure) } else { state.reach.record(failure) }
        }
    }

    /// Each placement's result, in order: one batch request, or one request
    /// each once the backend shows it has no batch endpoint.
    private func resolveBatch(_ placements: [String], _ identity: Identity, _ log: AttemptLog) async -> [LiveResult] {
        do {
            let results = try await client.resolveBatch(placements, identity, attempts: log)
            // The batch got no answer when none of its keys did.
            let failures = results.map(\.failure)
            let unanswered = failures.allSatisfy { $0?.isUnavailable == true }
            record(unanswered ? failures.first ?? nil : nil, log)
            return results
        } catch {
            // 404/405/501: no batch endpoint; remember it for the rest of the run.
            record(nil, log)
            state.withLock { $0.batchUnavailable = true }
            return await withTaskGroup(of: (Int, LiveResult).self) { group in
                for (index, placement) in placements.enumerated() {
                    group.addTask { (index, await self.resolveOne(placement, identity, log)) }
                }
                var results = placements.map { LiveResult.failed(.missingResult(placement: $0)) }
                for await (index, result) in group { results[index] = result }
                return results
            }
        }
    }

    /// The answers of one identity's placements landing together, their
    /// landings already with their callers: each validated flow staged (all
    /// in one trip) and, once every flow is durable or failed, each
    /// landing's result given, its alias pointed and its fonts started, by
    /// the thread that made them durable: no task waits for the disk. A
    /// flow that cannot be written is a failure (`cache-write`): nothing was warmed.
    private func land(
        _ results: [(String, LiveResult)], _ landings: [LiveLanding], _ durable: Pending<[LiveResult]>,
        _ identity: Identity, then released: @escaping @Sendable () -> Void
    ) {
        var flows: [(placement: String, document: FlowDocument, ttlSeconds: Int)] = []
        for (placement, result) in results {
            if case .flow(let document, let ttl) = result {
                flows.append((placement, document, ttl ?? config.environment.defaultTTL))
            }
        }
        store.stage(
            flows, identity: identity, tier: .network, resolvedAt: config.currentTime, commit: .shared
        ) { [self] stored in
            var stored = stored.makeIterator()
            var results: [LiveResult] = []
            results.reserveCapacity(landings.count)
            for landing in landings {
                guard case .flow(let document, let ttl) = landing.answer, let outcome = stored.next() else {
                    results.append(landing.answer)
                    continue
                }
                switch outcome {
                case .success(let entry):
                    aliases.stored(entry)
                    media.startFonts(of: document)
                    results.append(landing.answer)
                case .failure(let error):
                    results.append(
                        .unstored(
                            document, ttlSeconds: ttl ?? config.environment.defaultTTL,
                            reason: "the flow could not be written to the cache: \(error)"))
                }
            }
            // Released first: a caller that waits for `durable` and then asks again finds the flow in the
            // cache, never a key still running.
            released()
            durable.fulfil(results)
        }
    }
}

/// A live resolve started or joined: its landing to come, and the log of
/// its request's attempts.
struct LiveCall: Sendable {
    let landing: Pending<LiveLanding>
    let attempts: AttemptLog?
}

/// What became of the resolves whose callers stopped waiting at their
/// timeout, counted at the end of a run's grace: only a flow made durable in
/// the cache is `landed`.
public struct LateResolves: Sendable, Equatable {
    public var landed = 0
    public var failed = 0
    public var noFlow = 0
    public var pending = 0
    public init() {}
}

/// One placement's live resolve in its two phases: the backend's answer
/// (`answer`), and the result once its flow is written and durable (the
/// answer, or `.unstored` when the flow could not be written), read from
/// the results of every placement of its request, which come together.
struct LiveLanding: Sendable {
    let answer: LiveResult
    private let results: Pending<[LiveResult]>
    private let index: Int

    /// Placement `index` of a request whose results once durable `results` will give.
    init(_ answer: LiveResult, index: Int, of results: Pending<[LiveResult]>) {
        (self.answer, self.index, self.results) = (answer, index, results)
    }

    /// An answer with nothing to write: its result is the answer.
    init(_ answer: LiveResult) {
        self.answer = answer
        (results, index) = (Pending(), 0)
        results.fulfil([answer])
    }

    /// The result once durable; nil when `limit` passes first or the waiting task is cancelled.
    func durable(within limit: Duration) async -> LiveResult? {
        await results.value(within: limit).map { $0[index] }
    }

    /// Calls `body` with the result once durable (at once when it is), on the thread that gives it.
    func whenDurable(_ body: @escaping @Sendable (LiveResult) -> Void) {
        let index = index
        results.whenFulfilled { body($0[index]) }
    }

    /// The result if it is durable already.
    var durableIfReady: LiveResult? { results.valueIfFulfilled.map { $0[index] } }
}
