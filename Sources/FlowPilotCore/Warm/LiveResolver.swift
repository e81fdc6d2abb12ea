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
    /// running, else started (together in one batch request when two or more
    /// start and the backend has a batch endpoint). Every placement gets a result to come.
    func start(_ placements: [String], for identity: Identity) -> [String: Pending<LiveResult>] {
        let fingerprint = identity.fingerprint
        let keys = placements.map { Key(placement: $0, fingerprint: fingerprint) }
        let tasks = pool.tasks(for: keys) { missing in
            let batchable = missing.count >= 2 && config.batch && !state.withLock { $0.batchUnavailable }
            let batch = batchable ? Task { await self.resolveBatch(missing.map(\.placement), identity) } : nil
            return Dictionary(
                uniqueKeysWithValues: missing.map { key in
                    let work: @Sendable () async -> LiveResult = {
                        let result =
                            if let batch {
                                await batch.value[key.placement] ?? .failed(.missingResult(placement: key.placement))
                            } else {
                                await self.resolveOne(key.placement, identity)
                            }
                        return await self.landing(key.placement, identity, result)
                    }
                    return (key, work)
                })
        }
        return Dictionary(uniqueKeysWithValues: tasks.map { ($0.key.placement, $0.value) })
    }

    /// The live resolve of one placement, joined or started.
    func start(_ placement: String, for identity: Identity) -> Pending<LiveResult> {
        let key = Key(placement: placement, fingerprint: identity.fingerprint)
        return pool.task(for: key) {
            await self.landing(placement, identity, await self.resolveOne(placement, identity))
        }
    }

    /// The resolve's result within the resolveTimeout; a timeout leaves it running
    /// and remembered for `waitForLate`.
    func wait(_ resolve: Pending<LiveResult>) async -> Result<LiveResult, ResolveFailure> {
        if let result = await resolve.value(within: config.resolveTimeout) { return .success(result) }
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

    /// A validated flow lands in the cache, its fonts start downloading; then
    /// the result goes on to whoever waits. A flow that cannot be written is a
    /// failure (`cache-write`): nothing was warmed.
    private func landing(_ placement: String, _ identity: Identity, _ result: LiveResult) async -> LiveResult {
        guard case .flow(let document, let ttl) = result else { return result }
        do {
            let ttlSeconds = ttl ?? config.environment.defaultTTL
            let entry = try await store.storeFlow(
                placement: placement, identity: identity, document: document, ttlSeconds: ttlSeconds,
                tier: .network, resolvedAt: config.currentTime, commit: .shared)
            aliases.stored(entry)
        } catch {
            return .failed(.cacheWrite("the flow could not be written to the cache: \(error)"))
        }
        media.startFonts(of: document)
        return result
    }
}
