import AsyncHTTPClient
import Foundation
import NIOCore
import Synchronization

/// `production 300, staging 60, development 0, custom 0` seconds of default TTL.
public enum SDKEnvironment: String, Sendable, CaseIterable {
    case production, staging, development, custom

    public var defaultTTL: Int {
        switch self {
        case .production: 300
        case .staging: 60
        case .development, .custom: 0
        }
    }
}

/// Which images a prefetch warms (flow.md "Media sets").
public enum MediaStrategy: String, Sendable, CaseIterable {
    case none
    case firstScreen = "first-screen"
    case allScreens = "all-screens"
}

/// The SDK's PrefetchOutcome for one (identity, placement), with what a report needs.
public struct PrefetchOutcome: Sendable {
    public enum State: String, Sendable { case warmed, no_flow, failed }

    public let identity: Identity
    public let placement: String
    public let state: State
    /// For `warmed`: true from a local copy (fresh or stale), false from network or bundle.
    public let fromCache: Bool
    public let deliverySource: Tier?
    public let mediaWarmed: Bool
    public let flowID: String?
    public let version: String?
    public let ttlSeconds: Int?
    public let milliseconds: Int
    public let errorCode: String?
    public let errorMessage: String?
}

/// Settings of a warm run.
public struct WarmConfiguration: Sendable {
    public var environment = SDKEnvironment.production
    public var resolveTimeout: Duration = .seconds(4)
    public var media = MediaStrategy.firstScreen
    public var batch = true
    public var mediaConcurrency = 8
    public init() {}
}

/// The SDK's resolution chain and prefetch (seeds 000 and 003) over a cache
/// directory: Tier 0 fresh cache, Tier 1 live resolve bounded by resolveTimeout,
/// Tier 2 stale cache (same identity, then the placement's alias), Tier 3 the
/// bundled default. Live resolves for one (placement, fingerprint) are shared; a
/// caller that times out degrades while the shared resolve runs on and fills the
/// cache (`waitForLateResolves` lets a batch job wait for those).
public actor Warmer {
    let client: ResolveClient
    let store: CacheStore
    let bundle: LoadedBundle?
    let config: WarmConfiguration
    private var inflight: [String: Task<LiveResult, Never>] = [:]
    private var mediaInflight: [String: Task<Bool, Never>] = [:]
    private var batchUnavailable = false
    private var late: [Task<LiveResult, Never>] = []
    /// Live requests that failed to reach the backend at all (for exit status 69).
    public private(set) var unreachable = 0
    public private(set) var liveRequests = 0

    public init(client: ResolveClient, store: CacheStore, bundle: LoadedBundle?, config: WarmConfiguration) {
        self.client = client
        self.store = store
        self.bundle = bundle
        self.config = config
    }

    /// Prefetches placements for one identity: input de-duplicated, every key
    /// concurrently, one batch request for two or more live resolves.
    public func prefetch(_ placements: [String], for identity: Identity) async -> [PrefetchOutcome] {
        var seen = Set<String>()
        let keys = placements.filter { seen.insert($0).inserted }
        let start = ContinuousClock.now
        var outcomes: [String: PrefetchOutcome] = [:]
        var live: [String] = []
        for key in keys {
            if let (entry, doc) = store.lookupFlow(placement: key, identity: identity), entry.isFresh(at: Date()) {
                let media = await warmMedia(doc)
                outcomes[key] = outcome(identity, key, .warmed, fromCache: true, .cache, media, doc, entry.ttlSeconds, start)
            } else {
                live.append(key)
            }
        }
        let tasks = liveTasks(live, identity)
        await withTaskGroup(of: (String, PrefetchOutcome).self) { group in
            for key in live {
                let task = tasks[key]!
                group.addTask { (key, await self.finish(key, identity, task, start)) }
            }
            for await (key, o) in group { outcomes[key] = o }
        }
        return keys.map { outcomes[$0]! }
    }

    /// isPlacementReady: a fresh cache hit, else a live resolve that leaves the flow
    /// warm. The bundled default does not count.
    public func isReady(_ placement: String, for identity: Identity) async -> Bool {
        if let (entry, _) = store.lookupFlow(placement: placement, identity: identity), entry.isFresh(at: Date()) { return true }
        let task = liveTasks([placement], identity)[placement]!
        if case .flow = await waitBounded(task) ?? .noFlow { return true }
        return false
    }

    /// One placement through the chain, with a line per tier saying what happened.
    public func explain(_ placement: String, for identity: Identity) async -> (PrefetchOutcome, [String], FlowDocument?) {
        var steps: [String] = []
        let start = ContinuousClock.now
        if let (entry, doc) = store.lookupFlow(placement: placement, identity: identity) {
            if entry.isFresh(at: Date()) {
                steps.append("tier 0 cache: hit, fresh (age \(Int(entry.age(at: Date())))s of \(entry.ttlSeconds)s)")
                return (outcome(identity, placement, .warmed, fromCache: true, .cache, false, doc, entry.ttlSeconds, start), steps, doc)
            }
            steps.append("tier 0 cache: entry is stale (age \(Int(entry.age(at: Date())))s, ttl \(entry.ttlSeconds)s)")
        } else {
            steps.append("tier 0 cache: no entry for this identity")
        }
        let task = liveTasks([placement], identity)[placement]!
        let result = await finish(placement, identity, task, start)
        switch (result.state, result.deliverySource) {
        case (.warmed, .network?): steps.append("tier 1 live resolve: ok, cached with ttl \(result.ttlSeconds ?? 0)s")
        case (.no_flow, _): steps.append("tier 1 live resolve: the backend has no flow for this placement")
        default:
            steps.append("tier 1 live resolve: failed (\(lastFailure[placement + "\u{0}" + identity.fingerprint] ?? "error"))")
            switch result.deliverySource {
            case .stale_cache?: steps.append("tier 2 stale cache: served the last-known-good flow")
            case .bundled_default?: steps.append("tier 2 stale cache: nothing cached"); steps.append("tier 3 bundled default: served from the bundle")
            default:
                steps.append("tier 2 stale cache: nothing cached")
                steps.append(bundle == nil ? "tier 3 bundled default: no --bundle given" : "tier 3 bundled default: the bundle has no such placement")
            }
        }
        let doc: FlowDocument? = switch result.deliverySource {
        case .network?, .stale_cache?: store.lookupFlow(placement: placement, identity: identity)?.1 ?? store.lookupAlias(placement: placement)?.1
        case .bundled_default?: bundle?.flows[placement]?.document
        default: nil
        }
        return (result, steps, doc)
    }

    private var lastFailure: [String: String] = [:]

    /// Waits (up to `grace`) for live resolves whose callers timed out; returns
    /// how many landed and how many were still running.
    public func waitForLateResolves(grace: Duration) async -> (landed: Int, pending: Int) {
        let deadline = ContinuousClock.now + grace
        let tasks = late
        late = []
        for font in fontTasks where deadline > ContinuousClock.now { _ = await Self.race(font, deadline - ContinuousClock.now) }
        fontTasks = []
        guard !tasks.isEmpty else { return (0, 0) }
        var landed = 0
        for task in tasks {
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero { break }
            if await Self.race(task, remaining) != nil { landed += 1 }
        }
        return (landed, tasks.count - landed)
    }

    // MARK: Live resolves, shared per (placement, fingerprint)

    private func liveTasks(_ keys: [String], _ identity: Identity) -> [String: Task<LiveResult, Never>] {
        var tasks: [String: Task<LiveResult, Never>] = [:]
        var fresh: [String] = []
        for key in keys {
            if let running = inflight[key + "\u{0}" + identity.fingerprint] { tasks[key] = running } else { fresh.append(key) }
        }
        if fresh.count >= 2 && config.batch && !batchUnavailable {
            let batch = Task { await self.batchResolve(fresh, identity) }
            for key in fresh { tasks[key] = startShared(key, identity) { await batch.value[key] ?? .failed(code: "missing_result", message: "") } }
        } else {
            for key in fresh { tasks[key] = startShared(key, identity) { await self.countedResolve(key, identity) } }
        }
        return tasks
    }

    private func startShared(_ key: String, _ identity: Identity, _ resolve: @escaping @Sendable () async -> LiveResult) -> Task<LiveResult, Never> {
        let id = key + "\u{0}" + identity.fingerprint
        let task = Task {
            let result = await resolve()
            await self.land(key, identity, result)
            await self.done(id)
            return result
        }
        inflight[id] = task
        return task
    }

    private func done(_ id: String) { inflight[id] = nil }

    private func countedResolve(_ key: String, _ identity: Identity) async -> LiveResult {
        liveRequests += 1
        let r = await client.resolve(key, identity)
        if case .failed(let code, _) = r, code == "unreachable" { unreachable += 1 }
        return r
    }

    private func batchResolve(_ keys: [String], _ identity: Identity) async -> [String: LiveResult] {
        liveRequests += 1
        do {
            let r = try await client.resolveBatch(keys, identity)
            if r.values.allSatisfy({ if case .failed("unreachable", _) = $0 { true } else { false } }) { unreachable += 1 }
            return r
        } catch {
            // 404/405/501: no batch endpoint; remember it for the rest of the run.
            batchUnavailable = true
            var out: [String: LiveResult] = [:]
            await withTaskGroup(of: (String, LiveResult).self) { group in
                for key in keys { group.addTask { (key, await self.countedResolve(key, identity)) } }
                for await (k, r) in group { out[k] = r }
            }
            return out
        }
    }

    /// A successful live resolve lands in the cache (with its fonts) whether or
    /// not its caller is still waiting. Only validated flows get here.
    private func land(_ key: String, _ identity: Identity, _ result: LiveResult) async {
        if case .failed(let code, let message) = result { lastFailure[key + "\u{0}" + identity.fingerprint] = "\(code): \(message)" }
        guard case .flow(let doc, let ttl) = result else { return }
        _ = try? store.storeFlow(placement: key, identity: identity, document: doc,
                                 ttlSeconds: ttl ?? config.environment.defaultTTL, tier: .network)
        // Fonts warm with the flow but do not hold up its outcome; the run waits
        // for them at the end like for late resolves (`waitForLateResolves`).
        for font in doc.fonts where !(font.sha256.map(store.hasFont) ?? false) {
            fontTasks.append(fetchOnce(font.url) { data in
                (try? self.store.storeFont(data, sha256: font.sha256, ext: URL(string: font.url)?.pathExtension ?? "ttf")) != nil
            })
        }
    }

    private var fontTasks: [Task<Bool, Never>] = []

    private func waitBounded(_ task: Task<LiveResult, Never>) async -> LiveResult? {
        let r = await Self.race(task, config.resolveTimeout)
        if r == nil { late.append(task) }
        return r
    }

    /// The task's value, or nil when `limit` passes first. The task runs on either
    /// way (awaiting a task's value cannot be cancelled, so no task group here: it
    /// would wait for the loser).
    static func race<T: Sendable>(_ task: Task<T, Never>, _ limit: Duration) async -> T? {
        let once = Once()
        return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            Task {
                let value = await task.value
                if once.claim() { continuation.resume(returning: value) }
            }
            Task {
                try? await Task.sleep(for: limit)
                if once.claim() { continuation.resume(returning: nil) }
            }
        }
    }

    private func finish(_ key: String, _ identity: Identity, _ task: Task<LiveResult, Never>, _ start: ContinuousClock.Instant) async -> PrefetchOutcome {
        let result = await waitBounded(task)
        switch result {
        case .flow(let doc, let ttl)?:
            let media = await warmMedia(doc)
            return outcome(identity, key, .warmed, fromCache: false, .network, media, doc, ttl ?? config.environment.defaultTTL, start)
        case .noFlow?:
            return outcome(identity, key, .no_flow, fromCache: false, nil, false, nil, nil, start)
        case .failed(let code, let message)?:
            return fallback(key, identity, code, message, start)
        case nil:
            return fallback(key, identity, "timeout", "no answer within \(config.resolveTimeout)", start)
        }
    }

    private func fallback(_ key: String, _ identity: Identity, _ code: String, _ message: String, _ start: ContinuousClock.Instant) -> PrefetchOutcome {
        lastFailure[key + "\u{0}" + identity.fingerprint] = "\(code): \(message)"
        if let (entry, doc) = store.lookupFlow(placement: key, identity: identity) ?? store.lookupAlias(placement: key) {
            return outcome(identity, key, .warmed, fromCache: true, .stale_cache, false, doc, entry.ttlSeconds, start)
        }
        if let flow = bundle?.flows[key] {
            return outcome(identity, key, .warmed, fromCache: false, .bundled_default, false, flow.document, nil, start)
        }
        return PrefetchOutcome(identity: identity, placement: key, state: .failed, fromCache: false, deliverySource: nil,
                               mediaWarmed: false, flowID: nil, version: nil, ttlSeconds: nil,
                               milliseconds: Self.ms(since: start), errorCode: code, errorMessage: message)
    }

    private func outcome(_ identity: Identity, _ key: String, _ state: PrefetchOutcome.State, fromCache: Bool, _ source: Tier?,
                         _ media: Bool, _ doc: FlowDocument?, _ ttl: Int?, _ start: ContinuousClock.Instant) -> PrefetchOutcome {
        PrefetchOutcome(identity: identity, placement: key, state: state, fromCache: fromCache, deliverySource: source,
                        mediaWarmed: media, flowID: doc?.id, version: doc?.version, ttlSeconds: ttl,
                        milliseconds: Self.ms(since: start), errorCode: nil, errorMessage: nil)
    }

    public static func ms(since start: ContinuousClock.Instant) -> Int {
        let d = ContinuousClock.now - start
        return Int(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)
    }

    // MARK: Media

    /// Warms the strategy's images (skipping cached ones, one download per URL for
    /// the whole run, at most `mediaConcurrency` at once). Best effort: true when it
    /// ran and every image is now cached.
    private func warmMedia(_ doc: FlowDocument) async -> Bool {
        let urls: [String] = switch config.media {
        case .none: []
        case .firstScreen: doc.firstScreenImages
        case .allScreens: doc.allImages
        }
        guard config.media != .none else { return false }
        var tasks: [Task<Bool, Never>] = []
        for url in urls where !store.hasImage(url: url) {
            tasks.append(fetchOnce(url) { data in (try? self.store.storeImage(url: url, data: data)) ?? false })
        }
        var all = true
        for t in tasks { if await !t.value { all = false } }
        return all
    }

    /// One download per URL for the whole run (images and fonts), at most
    /// `mediaConcurrency` at once; `keep` stores the bytes and says whether it did.
    private func fetchOnce(_ url: String, keep: @escaping @Sendable (Data) -> Bool) -> Task<Bool, Never> {
        if let running = mediaInflight[url] { return running }
        let task = Task {
            await self.mediaSlot()
            let data = await self.download(url)
            await self.releaseMediaSlot()
            guard let data else { return false }
            return keep(data)
        }
        mediaInflight[url] = task
        return task
    }

    private var mediaRunning = 0
    private var mediaWaiters: [CheckedContinuation<Void, Never>] = []

    private func mediaSlot() async {
        if mediaRunning < config.mediaConcurrency { mediaRunning += 1; return }
        await withCheckedContinuation { mediaWaiters.append($0) }
    }

    private func releaseMediaSlot() {
        if mediaWaiters.isEmpty { mediaRunning -= 1 } else { mediaWaiters.removeFirst().resume() }
    }

    /// A plain GET (images, fonts); nil on any failure: media never fail a prefetch.
    nonisolated func download(_ url: String) async -> Data? {
        if case .success(let data) = await MediaDownload.fetch(url, client: client.client, limit: store.budgets.imageDiskBytes,
                                                               timeout: .seconds(10)) {
            return data
        }
        return nil
    }
}

/// True for the first caller of `claim()` only.
final class Once: Sendable {
    private let done = Mutex(false)

    func claim() -> Bool {
        done.withLock { d in
            defer { d = true }
            return !d
        }
    }
}
