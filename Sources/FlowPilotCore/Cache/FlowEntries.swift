import Foundation
import Synchronization

/// One flow to store for an identity: its placement, document and TTL.
public typealias FlowToStore = (placement: String, document: FlowDocument, ttlSeconds: Int)

/// Flow entries as one cache format keeps them: the one interface through
/// which the cache's flows are written and looked up. Format 1
/// (`FileEntries`: a file an entry under `flows/`, an empty file an alias
/// under `aliases/`) and format 2 (`LoggedEntries`: records in `log/`, the
/// flows' bytes in `objects/`) are its two implementations; migrating from
/// one to the other is `CacheMigration`'s.
///
/// `CacheStore` asks which format a call is in at one place,
/// `readEntries` and `writeEntries`; its public calls (`storeFlow`,
/// `storeFlows`, `stage`, `lookupFlow`, `lookupAlias`, `pointAlias`) only
/// forward to them.
protocol FlowEntries {
    /// A batch of one identity's flows: the entries they become, and the
    /// write that stages them for `commit` under the shared lock and tells
    /// `StagedFlows` each one's result once it is durable or failed. The
    /// write is called on the caller's thread and does not block: it hands
    /// its work to a blocking-I/O thread (format 1: one trip an identity;
    /// format 2: a queue drained a batch of identities at a time).
    func staging(_ flows: [FlowToStore], identity: Identity, tier: Tier, resolvedAt: Date, commit: GroupCommit)
        -> (entries: [CachedFlow], write: @Sendable (StagedFlows) -> Void)

    /// One entry written and durable on its own, and with `pointAlias` its
    /// placement's alias pointed at it.
    func store(_ flow: FlowToStore, identity: Identity, tier: Tier, resolvedAt: Date, pointAlias: Bool) throws
        -> CachedFlow

    /// One entry queued for `commit`, `waiter` told once it is durable or failed.
    func enqueue(
        _ flow: FlowToStore, identity: Identity, tier: Tier, resolvedAt: Date, commit: GroupCommit,
        waiter: any CommitWaiter
    ) throws -> CachedFlow

    /// The placement's alias pointed at `entry`; with `ifPresent`, only if
    /// the entry is still there (a prune may have removed it since).
    func pointAlias(to entry: CachedFlow, ifPresent: Bool) throws

    /// The newest entry of (placement, identity) whose flow reads back
    /// whole and valid, fresh or stale; nil when there is none.
    func lookup(placement: String, identity: Identity) -> (CachedFlow, FlowDocument)?

    /// `lookup` of each placement of one identity, in order: where a format
    /// can, from one look at what it keeps (format 2: one `stat` of `log/`
    /// and one `fstat` of each segment it does not write or know sealed, for all of them).
    func lookup(placements: [String], identity: Identity) -> [(CachedFlow, FlowDocument)?]

    /// The entry the placement's alias points at, read as `lookup` reads it.
    func lookupAlias(placement: String) -> (CachedFlow, FlowDocument)?

    /// The names at the cache's root this format keeps its entries in.
    var directories: [String] { get }

    /// One of `directories` read into `scan` (`CacheStore.scan`); `flows`
    /// false leaves format 1's entries out (a migration reads them in
    /// chunks), `survey` false leaves format 2's log unsurveyed.
    func scan(_ directory: String, into scan: inout CacheScan, flows: Bool, survey: LogSurvey.Mode)

    /// The names at the root of the format a cache migrates from to this
    /// one: in a cache of this format, what a migration left
    /// (`CacheScan.migrationLeftovers`, which `prune` carries over and removes).
    var predecessors: [String] { get }

    // MARK: Maintenance: what `verify` and `prune` ask of the entries a walk of this format handed over

    /// What is wrong with an entry (`cache verify`'s `cache-corrupt-entry`),
    /// nil when its flow reads back whole, valid, and the flow it names.
    func problem(of entry: CachedFlow) -> String?

    /// An entry's flow, nil when it does not read back whole and valid.
    func document(of entry: CachedFlow) -> FlowDocument?

    /// Whether an entry is the identity's with this user id (`prune --user-id`), compared by bytes.
    func isUser(_ user: String, of entry: CachedFlow) -> Bool

    /// The entry an alias points at as a walk hands it over (its key's
    /// newest, or the newest that serves), nil when there is none: one key
    /// looked up, not a set of every entry.
    func target(of alias: CacheScan.Alias) -> CachedFlow?

    /// Whether a removal's or a finding's path is one of this format's
    /// records (or a segment holding them): removed by `removeRecords`, not by `unlink`.
    func isRecord(_ path: String) -> Bool

    /// What `cache info` counts of the entries, from a summary this format
    /// keeps of them at rest (format 2's `log/summary.json`, `LogSummary`)
    /// without reading them; nil when there is none that still holds, or
    /// freshness at `now` needs the entries themselves.
    func restingCounts(at now: Date) -> RestingCounts?

    /// The same counts from what each piece of storage says of its entries
    /// without reading them (format 2: `FactsSurvey`, each sealed segment's
    /// index and facts); nil where that cannot answer (format 1: always).
    func surveyedCounts(at now: Date) -> RestingCounts?

    /// Rewrites what holds this format's records without those `drops`
    /// names, nor any torn or corrupt bytes: the flows no record points at
    /// any more, and the paths of what could not be rewritten, with why.
    /// Nothing for a format whose entries are files.
    func removeRecords(dropping drops: (LogRecord, String) -> Bool) throws -> RemovedRecords
}

/// `FlowEntries.restingCounts`: each placement's entries, fresh ones and
/// bytes, the placements with an alias (by directory name), and the
/// oldest and newest `resolved_at`.
struct RestingCounts {
    var counts: [(name: String, entries: Int, fresh: Int, bytes: Int64)]
    var aliases: [String]
    var oldest: Date?
    var newest: Date?
}

/// What `FlowEntries.removeRecords` did: the flows it left unreferenced
/// and removed, and what it could not rewrite (a segment's path and why).
struct RemovedRecords {
    var objects: [(path: String, size: Int64)] = []
    var notRemoved: [(path: String, reason: String)] = []
}

extension FlowEntries {
    func lookup(placements: [String], identity: Identity) -> [(CachedFlow, FlowDocument)?] {
        placements.map { lookup(placement: $0, identity: identity) }
    }
}

extension CacheStore {
    /// The entries of format 2 (`log`) or format 1: the one place that names the two.
    func entries(log: Bool) -> any FlowEntries { log ? LoggedEntries(store: self) : FileEntries(store: self) }

    /// The format of the entries `scan` holds: what `verify` and `prune` ask of each.
    func entries(of scan: CacheScan) -> any FlowEntries { entries(log: scan.logged) }

    /// The format entries are read in: the log once this cache is format 2.
    var readEntries: any FlowEntries { entries(log: usesLog) }

    /// The format entries are written in: the log once this cache is format
    /// 2, or was migrated since it was opened as format 1 (the marker read
    /// again, `currentVersion`).
    var writeEntries: any FlowEntries { entries(log: writesLog) }

    /// Where a lookup that missed looks next: the log, when the cache was
    /// opened as format 1 and migrated since.
    private var migratedEntries: (any FlowEntries)? {
        !usesLog && currentVersion() >= 2 ? entries(log: true) : nil
    }

    /// Stores a validated flow for (placement, identity) and, unless the caller
    /// takes that on (`pointAlias: false`, see `pointAlias(to:)`), points the
    /// placement's last-known-good alias at it. Nothing partial is ever visible.
    /// One entry, synced on its own: a writer of many uses the overload that
    /// takes a `GroupCommit`.
    @discardableResult
    public func storeFlow(
        placement: String, identity: Identity, document: FlowDocument,
        ttlSeconds: Int, tier: Tier, resolvedAt: Date = Date(), pointAlias: Bool = true
    ) throws -> CachedFlow {
        try writeEntries.store(
            (placement, document, ttlSeconds), identity: identity, tier: tier, resolvedAt: resolvedAt,
            pointAlias: pointAlias)
    }

    /// Stores a flow as `storeFlow` does, made durable with the other entries
    /// `commit` has queued (`GroupCommit`): the bytes are written here, on the
    /// caller's thread, and `waiter` is told once the entry is durable (nil)
    /// or could not be written, after the key's older files are removed. The
    /// alias is the caller's (`pointAlias(to:)`). Blocks while `prune` or
    /// `clear` hold the cache; call it off the threads Swift's concurrency runs on.
    @discardableResult
    public func storeFlow(
        placement: String, identity: Identity, document: FlowDocument, ttlSeconds: Int, tier: Tier,
        resolvedAt: Date = Date(), commit: GroupCommit, waiter: any CommitWaiter
    ) throws -> CachedFlow {
        try writeEntries.enqueue(
            (placement, document, ttlSeconds), identity: identity, tier: tier, resolvedAt: resolvedAt, commit: commit,
            waiter: waiter)
    }

    /// As above, returning once the entry is durable.
    public func storeFlow(
        placement: String, identity: Identity, document: FlowDocument, ttlSeconds: Int, tier: Tier,
        resolvedAt: Date = Date(), commit: GroupCommit
    ) async throws -> CachedFlow {
        let stored = await storeFlows(
            [(placement, document, ttlSeconds)], identity: identity, tier: tier, resolvedAt: resolvedAt, commit: commit)
        return try stored[0].get()
    }

    /// Several flows of one identity stored as `storeFlow` stores one, each
    /// flow's result in order once every one is durable or failed: `stage`,
    /// awaited.
    public func storeFlows(
        _ flows: [FlowToStore], identity: Identity, tier: Tier, resolvedAt: Date = Date(), commit: GroupCommit
    ) async -> [Result<CachedFlow, any Error>] {
        await withCheckedContinuation { done in
            stage(flows, identity: identity, tier: tier, resolvedAt: resolvedAt, commit: commit) {
                done.resume(returning: $0)
            }
        }
    }

    /// Several flows of one identity written on the blocking-I/O threads
    /// (`FlowEntries.staging` says how) and queued for `commit`, with no wait at all: `then` gets
    /// every flow's result, in order, once every one is durable or failed,
    /// on the thread that made it so (the group commit's). A warm's resolve
    /// hands its answers on this way and ends, with no task waiting for the
    /// disk. The one way flows are staged; `storeFlows` awaits it.
    func stage(
        _ flows: [FlowToStore], identity: Identity, tier: Tier, resolvedAt: Date, commit: GroupCommit,
        then: @escaping @Sendable ([Result<CachedFlow, any Error>]) -> Void
    ) {
        guard !flows.isEmpty else { return then([]) }
        let (entries, write) = writeEntries.staging(
            flows, identity: identity, tier: tier, resolvedAt: resolvedAt, commit: commit)
        write(StagedFlows(entries, then: then))
    }

    /// Points the placement's last-known-good alias at `entry` (a name that sorts
    /// after every older one, so the newest resolve wins).
    public func pointAlias(to entry: CachedFlow) throws {
        try writeEntries.pointAlias(to: entry, ifPresent: false)
    }

    /// Points the alias at `entry` if it is still there: a `prune` may have
    /// removed it since it was written (a writer that points aliases after a
    /// group of entries, not with each).
    public func pointAliasIfPresent(to entry: CachedFlow) throws {
        try writeEntries.pointAlias(to: entry, ifPresent: true)
    }

    /// The newest entry for exactly this (placement, fingerprint), fresh or stale,
    /// read and checked. A corrupt or unreadable entry is a miss.
    public func lookupFlow(placement: String, identity: Identity) -> (CachedFlow, FlowDocument)? {
        readEntries.lookup(placement: placement, identity: identity)
            ?? migratedEntries?.lookup(placement: placement, identity: identity)
    }

    /// `lookupFlow` of each of an identity's placements, in order, looked up
    /// together (`FlowEntries.lookup(placements:identity:)`).
    func lookupFlows(_ placements: [String], identity: Identity) -> [(CachedFlow, FlowDocument)?] {
        var found = readEntries.lookup(placements: placements, identity: identity)
        guard found.contains(where: { $0 == nil }), let migrated = migratedEntries else { return found }
        for index in found.indices where found[index] == nil {
            found[index] = migrated.lookup(placement: placements[index], identity: identity)
        }
        return found
    }

    /// The placement's last-known-good flow for any identity (Tier 2 after an
    /// identity change), or nil when the alias is missing or dangling.
    public func lookupAlias(placement: String) -> (CachedFlow, FlowDocument)? {
        readEntries.lookupAlias(placement: placement) ?? migratedEntries?.lookupAlias(placement: placement)
    }
}

/// One identity's flows written and queued for a group commit
/// (`CacheStore.stage`): `then` is told each flow's result, in order, once
/// every one is durable or failed.
final class StagedFlows: Sendable {
    private let then: @Sendable ([Result<CachedFlow, any Error>]) -> Void
    private let state: Mutex<(left: Int, results: [Result<CachedFlow, any Error>])>

    init(_ entries: [CachedFlow], then: @escaping @Sendable ([Result<CachedFlow, any Error>]) -> Void) {
        self.then = then
        state = Mutex((entries.count, entries.map { .success($0) }))
    }

    /// Every flow durable (nil) or failed with `error`: the results given.
    func finishAll(_ error: (any Error)?) {
        let finished = state.withLock { state -> [Result<CachedFlow, any Error>] in
            if let error { state.results = state.results.map { _ in .failure(error) } }
            state.left = 0
            return state.results
        }
        then(finished)
    }

    /// Flow `index` is durable (nil) or failed; the last one releases the
    /// shared lock the batch held, then gives the results.
    func finish(_ index: Int, _ error: (any Error)?, lock: CacheStore.Lock?) {
        let finished = state.withLock { state -> [Result<CachedFlow, any Error>]? in
            if let error { state.results[index] = .failure(error) }
            state.left -= 1
            return state.left == 0 ? state.results : nil
        }
        guard let finished else { return }
        lock?.release()
        then(finished)
    }
}
