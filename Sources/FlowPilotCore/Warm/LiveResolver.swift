import Foundation
import Synchronization

/// Tier 1 for a run: live resolves shared per (placement, fingerprint), one
/// batch request per identity for two or more placements (per-placement
/// requests once the backend shows it has no batch endpoint, for the rest of
/// the run), and every validated flow landing in the cache whether or not its
/// caller still waits. A caller that gives up at its resolveTimeout leaves the
/// request running; `waitForLate` lets a batch job wait for those.
final class LiveResolver: Sendable {
    struct Key: Hashable, Sendable {
        let placement: String
        let fingerprint: String
    }

    let client: ResolveClient
    let store: CacheStore
    let media: MediaWarmer
    let config: WarmConfiguration
    let aliases: AliasWriter
    private let pool = InflightPool<Key, LiveResult>()
    private let state = Mutex<(reach: BackendReach, batchUnavailable: Bool, late: [Pending<LiveResult>])>(
        (BackendReach(), false, []))

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
    /// and landing every flow in one commit, when two or more start and the
    /// backend has a batch endpoint; else a task each. Every placement gets a
    /// result to come. `answered` is called once the requests started here
    /// have their answers and the flows in them are written, before those are
    /// durable (at once when every placement joined a running resolve): from
    /// then on the results wait only for the group commit.
    func start(
        _ placements: [String], for identity: Identity, answered: (@Sendable () -> Void)? = nil
    ) -> [String: Pending<LiveResult>] {
        let fingerprint = identity.fingerprint
        let keys = placements.map { Key(placement: $0, fingerprint: fingerprint) }
        var started = false
        let values = pool.values(for: keys) { missing, deliver in
            started = true
            let batchable = missing.count >= 2 && config.batch && !state.withLock { $0.batchUnavailable }
            guard batchable else {
                let answers = Countdown(missing.count, answered)
                for key in missing {
                    Task {
                        let result = await self.resolveOne(key.placement, identity)
                        deliver(key, await self.landing([(key.placement, result)], identity, written: answers.tick)[0])
                    }
                }
                return
            }
            Task {
                let results = await self.resolveBatch(missing.map(\.placement), identity)
                let landed = await self.landing(
                    missing.map {
                        ($0.placement, results[$0.placement] ?? .failed(.missingResult(placement: $0.placement)))
                    },
                    identity, written: answered)
                for (key, result) in zip(missing, landed) { deliver(key, result) }
            }
        }
        if !started { answered?() }
        return Dictionary(uniqueKeysWithValues: values.map { ($0.key.placement, $0.value) })
    }

    /// The live resolve of one placement, joined or started.
    func start(_ placement: String, for identity: Identity) -> Pending<LiveResult> {
        // One placement is never batched: this starts or joins its own request.
        let started = start([placement], for: identity)
        // `start` gives every placement a result to come; this is never reached.
        return started[placement] ?? Pending.run { .failed(.missingResult(placement: placement)) }
    }

    /// The resolve's result within the resolveTimeout (or until `deadline`,
    /// when waiting for several); a timeout leaves it running and remembered
    /// for `waitForLate`.
    func wait(
        _ resolve: Pending<LiveResult>, until deadline: ContinuousClock.Instant? = nil
    ) async -> Result<LiveResult, ResolveFailure> {
        let limit = deadline.map { max(.zero, ContinuousClock.now.duration(to: $0)) } ?? config.resolveTimeout
        if let result = await resolve.value(within: limit) { return .success(result) }
        state.withLock { $0.late.append(resolve) }
        return .failure(.timeout("no answer within \(config.resolveTimeout)"))
    }

    /// Waits until `deadline` for resolves whose callers timed out: how many
    /// landed, how many were still running.
    func waitForLate(until deadline: ContinuousClock.Instant) async -> (landed: Int, pending: Int) {
        let tasks = state.withLock { state in
            defer { state.late = [] }
            return state.late
        }
        var landed = 0
        for resolve in tasks {
            guard deadline > .now else { break }
            if await resolve.value(within: deadline - .now) != nil { landed += 1 }
        }
        aliases.flush()
        return (landed, tasks.count - landed)
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

    /// The results of one identity's placements landing together: each
    /// validated flow written (all in one trip, then `written` is called) and
    /// made durable in one commit, its fonts starting to download; then the
    /// results, in order, go on to whoever waits. A flow that cannot be written
    /// is a failure (`cache-write`): nothing was warmed.
    private func landing(
        _ results: [(String, LiveResult)], _ identity: Identity, written: (@Sendable () -> Void)?
    ) async -> [LiveResult] {
        var flows: [(placement: String, document: FlowDocument, ttlSeconds: Int)] = []
        for (placement, result) in results {
            if case .flow(let document, let ttl) = result {
                flows.append((placement, document, ttl ?? config.environment.defaultTTL))
            }
        }
        var stored = await store.storeFlows(
            flows, identity: identity, tier: .network, resolvedAt: config.currentTime, commit: .shared,
            staged: written
        ).makeIterator()
        return results.map { _, result in
            guard case .flow(let document, let ttl) = result, let outcome = stored.next() else { return result }
            switch outcome {
            case .success(let entry):
                aliases.stored(entry)
                media.startFonts(of: document)
                return result
            case .failure(let error):
                return .unstored(
                    document, ttlSeconds: ttl ?? config.environment.defaultTTL,
                    reason: "the flow could not be written to the cache: \(error)")
            }
        }
    }
}
