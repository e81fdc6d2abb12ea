import Foundation
import Synchronization

/// One cached flow as its file name describes it (no file read needed).
public struct CachedFlow: Sendable {
    /// The fields behind one reference: an entry is handed from the cache's
    /// staging to the alias writer and the outcome, and a copy costs one
    /// retain, not one for each of its strings.
    private final class Storage: Sendable {
        let placement: String
        let fingerprint: String
        let userID: String?
        let flowID: String
        let version: String
        let resolvedAt: Date
        let ttlSeconds: Int
        let size: Int64
        let path: String
        let inLog: Bool
        let flowSHA256: String?

        init(
            placement: String, fingerprint: String, userID: String?, flowID: String, version: String,
            resolvedAt: Date, ttlSeconds: Int, size: Int64, path: String, inLog: Bool, flowSHA256: String?
        ) {
            (self.placement, self.fingerprint, self.userID, self.flowID) = (placement, fingerprint, userID, flowID)
            (self.version, self.resolvedAt, self.ttlSeconds, self.size) = (version, resolvedAt, ttlSeconds, size)
            (self.path, self.inLog, self.flowSHA256) = (path, inLog, flowSHA256)
        }

        func with(inLog: Bool) -> Storage {
            Storage(
                placement: placement, fingerprint: fingerprint, userID: userID, flowID: flowID, version: version,
                resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, size: size, path: path, inLog: inLog,
                flowSHA256: flowSHA256)
        }
    }

    private var storage: Storage

    public init(
        placement: String, fingerprint: String, userID: String?, flowID: String, version: String, resolvedAt: Date,
        ttlSeconds: Int, size: Int64, path: String
    ) {
        self.init(
            placement: placement, fingerprint: fingerprint, userID: userID, flowID: flowID, version: version,
            resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, size: size, path: path, inLog: false, flowSHA256: nil)
    }

    init(
        placement: String, fingerprint: String, userID: String?, flowID: String, version: String, resolvedAt: Date,
        ttlSeconds: Int, size: Int64, path: String, inLog: Bool, flowSHA256: String?
    ) {
        storage = Storage(
            placement: placement, fingerprint: fingerprint, userID: userID, flowID: flowID, version: version,
            resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, size: size, path: path, inLog: inLog,
            flowSHA256: flowSHA256)
    }

    public var placement: String { storage.placement }
    public var fingerprint: String { storage.fingerprint }
    /// nil when the user id was too long to keep in a name.
    public var userID: String? { storage.userID }
    public var flowID: String { storage.flowID }
    public var version: String { storage.version }
    public var resolvedAt: Date { storage.resolvedAt }
    public var ttlSeconds: Int { storage.ttlSeconds }
    public var size: Int64 { storage.size }
    /// Format 1: the entry's file. Format 2: `<cache>/log/<segment>#<offset>`, where its record is.
    public var path: String { storage.path }
    /// Whether the entry is a record of a format-2 cache's log, not a file of its own.
    var inLog: Bool {
        get { storage.inLog }
        set { storage = storage.with(inLog: newValue) }
    }
    /// Format 2: the name of the flow's object (its SHA-256).
    var flowSHA256: String? { storage.flowSHA256 }

    /// The key directory's name, `<fingerprint>~<user>` (in format 2, the name it would have).
    public var keyName: String {
        if inLog { return "\(fingerprint)~\(CacheNames.bounded(userID ?? "", max: CacheStore.maxNameField))" }
        return PathName.parent(of: path).split(separator: "/").last.map(String.init) ?? ""
    }

    /// `<placement dir>/<fingerprint>~<user>`, as the path names them: what an alias points at.
    var directoryKey: String {
        if inLog { return CacheNames.placement(placement) + "/" + keyName }
        let keyDir = PathName.parent(of: path)
        return PathName.lastComponent(of: PathName.parent(of: keyDir)) + "/" + PathName.lastComponent(of: keyDir)
    }

    /// A name's field too long to carry its value is a hash (`#…`): the
    /// entry's JSON holds the value. The same entry with the values read
    /// from it, or unchanged when nothing was hashed or the file cannot be read.
    func withFullValues() -> CachedFlow {
        guard !inLog, placement.hasPrefix("#") || userID == nil || flowID.hasPrefix("#") || version.hasPrefix("#"),
            let data = FileManager.default.contents(atPath: path), let json = try? JSONValue.parse(data),
            let fullPlacement = json["placement"]?.stringValue, let fullUser = json["user_id"]?.stringValue,
            let fullFlowID = json["flow_id"]?.stringValue, let fullVersion = json["version"]?.stringValue,
            json["fingerprint"]?.stringValue.sameBytes(as: fingerprint) == true,
            placement.sameBytes(as: fullPlacement) || CacheNames.placement(fullPlacement).sameBytes(as: placement)
        else { return self }
        return CachedFlow(
            placement: fullPlacement, fingerprint: fingerprint, userID: fullUser, flowID: fullFlowID,
            version: fullVersion, resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, size: size, path: path)
    }

    /// How far ahead of this clock another writer's may run: an entry
    /// resolved up to this long in the future counts as resolved now; one
    /// further ahead is from the future (docs/cache-format.md, "Time").
    public static let clockSkew: TimeInterval = 60

    /// `now - resolved_at`: negative for an entry from another writer's future.
    public func age(at now: Date) -> TimeInterval { now.timeIntervalSince(resolvedAt) }
    /// Resolved more than `clockSkew` after `now`: a writer's clock ran ahead.
    /// Such an entry is never fresh (it would stay fresh past its TTL); it is
    /// stale, listed, flagged by `verify` and pruned by any `--older-than`.
    public func isFromFuture(at now: Date) -> Bool { age(at: now) < -Self.clockSkew }
    /// Fresh while `now - resolved_at < ttl`, and not from the future.
    public func isFresh(at now: Date) -> Bool { Self.isFresh(resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, at: now) }

    /// `isFresh(at:)` of an entry resolved at `resolvedAt` with `ttlSeconds`
    /// (`ResolvedWithTTL` gives it to an entry's other shapes).
    static func isFresh(resolvedAt: Date, ttlSeconds: Int, at now: Date) -> Bool {
        // Within the skew, resolved ahead counts as resolved now (age 0): a TTL of 0 is never fresh.
        let age = now.timeIntervalSince(resolvedAt)
        return age >= -clockSkew && max(age, 0) < TimeInterval(ttlSeconds)
    }
}

extension CacheStore {
    static let maxNameField = 120

    func placementDir(_ placement: String) -> String { "\(flowsDir)/\(CacheNames.placement(placement))" }

    func keyDirName(fingerprint: String, userID: String) -> String {
        "\(fingerprint)~\(CacheNames.bounded(userID, max: Self.maxNameField))"
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
        if writesLog {
            return try storeLogged(
                placement: placement, identity: identity, document: document, ttlSeconds: ttlSeconds, tier: tier,
                resolvedAt: resolvedAt, pointAlias: pointAlias)
        }
        FaultHook.reach("format-1-decided")
        let prepared = flowEntry(
            placement: placement, identity: identity, document: document, ttlSeconds: ttlSeconds, tier: tier,
            resolvedAt: resolvedAt)
        let (entry, keyDir, name) = (prepared.entry, prepared.keyDir, prepared.name)
        try withLock(exclusive: false) {
            try AtomicFile.publish(prepared.data, directory: keyDir, name: name, mtime: resolvedAt)
            Self.removeOlder(in: keyDir, keeping: name)
            if pointAlias { try publishAlias(to: entry) }
        }
        return entry
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
        if writesLog {
            return try storeLogged(
                placement: placement, identity: identity, document: document, ttlSeconds: ttlSeconds, tier: tier,
                resolvedAt: resolvedAt, waiter: waiter)
        }
        FaultHook.reach("format-1-decided")
        let prepared = flowEntry(
            placement: placement, identity: identity, document: document, ttlSeconds: ttlSeconds, tier: tier,
            resolvedAt: resolvedAt)
        // The shared lock is held from the write until the entry is durable and its older files are gone.
        let lock = try Lock(path: lockPath, exclusive: false)
        do {
            let file = try stageEntry(prepared, commit: commit)
            commit.enqueue(file, waiter: EntryCommit(prepared, file, then: .one(lock, waiter)))
        } catch {
            lock.release()
            throw error
        }
        return prepared.entry
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
    /// flow's result in order once every one is durable or failed
    /// (`stage(_:identity:tier:resolvedAt:commit:)` and then its `durable`).
    public func storeFlows(
        _ flows: [(placement: String, document: FlowDocument, ttlSeconds: Int)], identity: Identity, tier: Tier,
        resolvedAt: Date = Date(), commit: GroupCommit
    ) async -> [Result<CachedFlow, any Error>] {
        await stage(flows, identity: identity, tier: tier, resolvedAt: resolvedAt, commit: commit).durable
    }

    /// Several flows of one identity written in one trip to the blocking-I/O
    /// threads and queued for `commit`: the first of a write's two phases.
    /// Returns once every flow is written (or failed to be), before any is
    /// durable; the second phase is the result's `durable`.
    ///
    ///     let staged = await store.stage(flows, identity: identity, tier: .network, commit: .shared)
    ///     // a warm starts its next identity here
    ///     let results = await staged.durable
    public func stage(
        _ flows: [(placement: String, document: FlowDocument, ttlSeconds: Int)], identity: Identity, tier: Tier,
        resolvedAt: Date = Date(), commit: GroupCommit
    ) async -> StagedFlows {
        guard !flows.isEmpty else { return StagedFlows(done: []) }
        let (entries, write) = stagingWrite(
            flows, identity: identity, tier: tier, resolvedAt: resolvedAt, commit: commit)
        return await staging(entries, write: write)
    }

    /// `stage` with no wait at all: the writes are handed to the blocking-I/O
    /// threads, and `then` gets every flow's result, in order, once every one
    /// is durable or failed, on the thread that made it so (the group
    /// commit's). A warm's resolve hands its answers on this way and ends,
    /// with no task waiting for the disk.
    func stage(
        _ flows: [(placement: String, document: FlowDocument, ttlSeconds: Int)], identity: Identity, tier: Tier,
        resolvedAt: Date, commit: GroupCommit, then: @escaping @Sendable ([Result<CachedFlow, any Error>]) -> Void
    ) {
        guard !flows.isEmpty else { return then([]) }
        let (entries, write) = stagingWrite(
            flows, identity: identity, tier: tier, resolvedAt: resolvedAt, commit: commit)
        let staged = StagedFlows(entries, then: then)
        BlockingIO.submit { write(staged) }
    }

    /// The entries `flows` become and the write that stages them, in either format.
    private func stagingWrite(
        _ flows: [(placement: String, document: FlowDocument, ttlSeconds: Int)], identity: Identity, tier: Tier,
        resolvedAt: Date, commit: GroupCommit
    ) -> ([CachedFlow], @Sendable (StagedFlows) -> Void) {
        if writesLog {
            let logged = flows.map {
                loggedEntry(
                    placement: $0.placement, identity: identity, document: $0.document, ttlSeconds: $0.ttlSeconds,
                    tier: tier, resolvedAt: resolvedAt)
            }
            return (logged.map(\.entry), { self.stageLogged(logged, to: $0) })
        }
        FaultHook.reach("format-1-decided")
        let prepared = flows.map {
            flowEntry(
                placement: $0.placement, identity: identity, document: $0.document, ttlSeconds: $0.ttlSeconds,
                tier: tier, resolvedAt: resolvedAt)
        }
        return (prepared.map(\.entry), { self.write(prepared, to: $0, commit: commit) })
    }

    /// `entries`' results, once `write` has written them on a blocking-I/O thread (either format's).
    private func staging(_ entries: [CachedFlow], write: @escaping @Sendable (StagedFlows) -> Void) async
        -> StagedFlows
    {
        let staged = StagedFlows(entries)
        await withCheckedContinuation { (written: CheckedContinuation<Void, Never>) in
            BlockingIO.submit {
                write(staged)
                written.resume()
            }
        }
        return staged
    }

    /// `stage`'s writes, on a blocking-I/O thread. One shared lock for the
    /// batch, from the first write until every entry is durable (or failed)
    /// and its key's older files are gone.
    private func write(_ prepared: [PreparedEntry], to staged: StagedFlows, commit: GroupCommit) {
        let lock: Lock
        do { lock = try Lock(path: lockPath, exclusive: false) } catch {
            for index in prepared.indices { staged.finish(index, error, lock: nil) }
            return
        }
        var files: [(GroupCommit.Staged, any CommitWaiter)] = []
        for (index, entry) in prepared.enumerated() {
            do {
                let file = try stageEntry(entry, commit: commit)
                files.append((file, EntryCommit(entry, file, then: .batch(staged, index, lock))))
            } catch {
                staged.finish(index, error, lock: lock)
            }
        }
        commit.enqueue(files)
    }

    /// An entry's file written for `commit` (not yet durable, the caller
    /// holding the shared lock).
    private func stageEntry(_ prepared: PreparedEntry, commit: GroupCommit) throws -> GroupCommit.Staged {
        // An entry's mtime is its resolved_at: a file written at that time has it already.
        let resolvedAt = prepared.entry.resolvedAt
        let mtime = abs(resolvedAt.timeIntervalSinceNow) < 1 ? nil : resolvedAt
        return try commit.stage(prepared.data, directory: prepared.keyDir, name: prepared.name, mtime: mtime)
    }

    /// What happens when an entry's commit is done, in one place: the key's
    /// older files removed if the entry is durable, then its writer told,
    /// the shared lock released by the last entry of the writer's batch. A
    /// key directory made for the entry had no older files to remove: it is
    /// not read again (a warm into an empty cache makes every key's).
    private struct EntryCommit: CommitWaiter {
        enum Writer {
            /// One entry of `stage`'s batch (`StagedFlows.finish`).
            case batch(StagedFlows, Int, Lock)
            /// `storeFlow`'s one entry: its lock released, then its waiter told.
            case one(Lock, any CommitWaiter)
        }

        let keyDir: String
        let name: String
        let madeDirectory: Bool
        let writer: Writer

        init(_ prepared: PreparedEntry, _ file: GroupCommit.Staged, then writer: Writer) {
            (keyDir, name, madeDirectory, self.writer) = (prepared.keyDir, prepared.name, file.madeDirectory, writer)
        }

        func committed(_ error: (any Error)?) {
            if error == nil, !madeDirectory { CacheStore.removeOlder(in: keyDir, keeping: name) }
            switch writer {
            case .batch(let staged, let index, let lock): staged.finish(index, error, lock: lock)
            case .one(let lock, let waiter):
                lock.release()
                waiter.committed(error)
            }
        }
    }

    /// An entry to write: its metadata, bytes, key directory and file name
    /// (kept apart, not taken back out of `entry.path`).
    struct PreparedEntry {
        let entry: CachedFlow
        let data: Data
        let keyDir: String
        let name: String
    }

    /// An entry's name, metadata and bytes.
    private func flowEntry(
        placement: String, identity: Identity, document: FlowDocument, ttlSeconds: Int, tier: Tier, resolvedAt: Date
    ) -> PreparedEntry {
        let data = Self.entryData(
            placement: placement, identity: identity, document: document, ttlSeconds: ttlSeconds, tier: tier,
            resolvedAt: resolvedAt)
        let keyDir =
            "\(placementDir(placement))/\(keyDirName(fingerprint: identity.fingerprint, userID: identity.userID))"
        let name = Self.entryName(
            stamp: CacheNames.stamp(resolvedAt), ttlSeconds: ttlSeconds, flowID: document.id,
            version: document.version)
        let entry = CachedFlow(
            placement: placement, fingerprint: identity.fingerprint, userID: identity.userID, flowID: document.id,
            version: document.version, resolvedAt: resolvedAt, ttlSeconds: ttlSeconds,
            size: Int64(data.count), path: "\(keyDir)/\(name)")
        return PreparedEntry(entry: entry, data: data, keyDir: keyDir, name: name)
    }

    /// `<stamp>~<ttl>~<flow id>~<version>.json`, each field within
    /// `maxNameField` bytes and the whole within `NAME_MAX`: where two
    /// fields of 120 bytes would pass it, both are hashed.
    static func entryName(stamp: String, ttlSeconds: Int, flowID: String, version: String) -> String {
        let prefix = stamp + "~" + String(max(0, ttlSeconds)) + "~"
        let name =
            prefix + CacheNames.bounded(flowID, max: maxNameField) + "~"
            + CacheNames.bounded(version, max: maxNameField) + ".json"
        if name.utf8.count <= CacheNames.maxName { return name }
        return prefix + CacheNames.hashed(flowID) + "~" + CacheNames.hashed(version) + ".json"
    }

    /// Points the placement's last-known-good alias at `entry` (a name that sorts
    /// after every older one, so the newest resolve wins).
    public func pointAlias(to entry: CachedFlow) throws {
        if writesLog { return try pointLoggedAlias(to: entry, ifPresent: false) }
        try withLock(exclusive: false) { try publishAlias(to: entry) }
    }

    /// Points the alias at `entry` if it is still there: a `prune` may have
    /// removed it since it was written (a writer that points aliases after a
    /// group of entries, not with each).
    public func pointAliasIfPresent(to entry: CachedFlow) throws {
        if writesLog { return try pointLoggedAlias(to: entry, ifPresent: true) }
        try withLock(exclusive: false) {
            if access(entry.path, F_OK) == 0 { try publishAlias(to: entry) }
        }
    }

    private func publishAlias(to entry: CachedFlow) throws {
        let aliasDir = "\(aliasesDir)/\(CacheNames.placement(entry.placement))"
        let aliasName = "\(CacheNames.stamp(entry.resolvedAt))~\(entry.keyName)"
        try AtomicFile.publish(Data(), directory: aliasDir, name: aliasName, mtime: entry.resolvedAt)
        Self.removeOlder(in: aliasDir, keeping: aliasName)
    }

    /// The entry file's bytes: canonical JSON whose `flow` member is the
    /// document's canonical bytes, spliced in rather than encoded again, the
    /// members written in their canonical order.
    static func entryData(
        placement: String, identity: Identity, document: FlowDocument, ttlSeconds: Int, tier: Tier, resolvedAt: Date
    ) -> Data {
        let flow = document.canonical
        var entry = CanonicalJSON.SortedObject(capacity: flow.data.count + 512)
        if let hash = document.contentHash {
            entry.string("content_hash", hash)
        } else {
            entry.raw("content_hash", "null".utf8)
        }
        entry.string("fingerprint", identity.fingerprint)
        entry.raw("flow", flow.data)
        entry.string("flow_id", document.id)
        entry.string("flow_sha256", flow.sha256)
        entry.string("placement", placement)
        entry.string("resolved_at", RFC3339.string(resolvedAt))
        entry.raw("schema_version", "1".utf8)
        entry.string("tier", tier.rawValue)
        entry.integer("ttl_seconds", ttlSeconds)
        entry.string("user_id", identity.userID)
        entry.string("version", document.version)
        return entry.finish()
    }

    /// The newest entry for exactly this (placement, fingerprint), fresh or stale,
    /// read and checked. A corrupt or unreadable entry is a miss.
    public func lookupFlow(placement: String, identity: Identity) -> (CachedFlow, FlowDocument)? {
        if usesLog { return lookupLogged(placement: placement, fingerprint: identity.fingerprint) }
        let dir = "\(placementDir(placement))/\(keyDirName(fingerprint: identity.fingerprint, userID: identity.userID))"
        if let found = newestEntry(placement: placement, keyDir: dir) { return found }
        // Opened as format 1 and migrated since: the entry is in the log now.
        return currentVersion() >= 2 ? lookupLogged(placement: placement, fingerprint: identity.fingerprint) : nil
    }

    /// The placement's last-known-good flow for any identity (Tier 2 after an
    /// identity change), or nil when the alias is missing or dangling.
    public func lookupAlias(placement: String) -> (CachedFlow, FlowDocument)? {
        if usesLog { return lookupLoggedAlias(placement: placement) }
        guard let alias = Self.published("\(aliasesDir)/\(CacheNames.placement(placement))").last else {
            return currentVersion() >= 2 ? lookupLoggedAlias(placement: placement) : nil
        }
        let parts = alias.name.split(separator: "~", maxSplits: 2)
        guard parts.count == 3 else { return nil }
        return newestEntry(placement: placement, keyDir: "\(placementDir(placement))/\(parts[2])")
    }

    private func newestEntry(placement: String, keyDir: String) -> (CachedFlow, FlowDocument)? {
        guard let newest = Self.published(keyDir).last,
            let entry = Self.parseEntryName(
                placement: placement, keyDir: PathName.lastComponent(of: keyDir),
                name: newest.name, size: 0, path: "\(keyDir)/\(newest.name)")
        else { return nil }
        guard let (doc, size) = Self.readEntry(entry) else { return nil }
        return (
            CachedFlow(
                placement: entry.placement, fingerprint: entry.fingerprint, userID: entry.userID, flowID: entry.flowID,
                version: entry.version, resolvedAt: entry.resolvedAt, ttlSeconds: entry.ttlSeconds, size: size,
                path: entry.path), doc
        )
    }

    /// Reads and checks an entry file: metadata agrees with its name, the flow's
    /// bytes match `flow_sha256`, the flow validates. Anything else: nil.
    static func readEntry(_ entry: CachedFlow) -> (FlowDocument, Int64)? {
        if let (doc, size, problem) = inspectEntry(entry), problem == nil, let doc { return (doc, size) }
        return nil
    }

    /// As `readEntry`, but says what is wrong (for `cache verify`).
    static func inspectEntry(_ entry: CachedFlow) -> (FlowDocument?, Int64, String?)? {
        guard let data = FileManager.default.contents(atPath: entry.path) else { return (nil, 0, "unreadable") }
        return inspectEntry(entry, data: data)
    }

    /// An entry file's bytes against the metadata its name carries.
    static func inspectEntry(_ entry: CachedFlow, data: Data) -> (FlowDocument?, Int64, String?) {
        guard let json = try? JSONValue.parse(data) else {
            return (nil, Int64(data.count), "not valid JSON (truncated or corrupt)")
        }
        guard let placement = json["placement"]?.stringValue,
            placement.sameBytes(as: entry.placement) || CacheNames.placement(placement).sameBytes(as: entry.placement),
            json["fingerprint"]?.stringValue.sameBytes(as: entry.fingerprint) == true,
            let flowID = json["flow_id"]?.stringValue,
            flowID.sameBytes(as: entry.flowID)
                || (entry.flowID.hasPrefix("#") && CacheNames.hashed(flowID).sameBytes(as: entry.flowID)),
            json["ttl_seconds"]?.numberValue == Double(entry.ttlSeconds), let flow = json["flow"]
        else {
            return (nil, Int64(data.count), "metadata disagrees with the file name")
        }
        guard json["flow_sha256"]?.stringValue == Digest.sha256Hex(CanonicalJSON.data(flow)) else {
            return (nil, Int64(data.count), "flow bytes do not match flow_sha256")
        }
        let (doc, findings) = FlowDocument.validate(flow, location: entry.path)
        guard let doc else { return (nil, Int64(data.count), "flow fails validation: \(findings.first?.line ?? "")") }
        return (doc, Int64(data.count), nil)
    }

    /// `<stamp ms>~<unique>~<ttl>~<flow id>~<version>.json` in `<fingerprint>~<user>`.
    static func parseEntryName(placement: String, keyDir: String, name: String, size: Int64, path: String)
        -> CachedFlow?
    {
        guard name.hasSuffix(".json") else { return nil }
        let fields = name.dropLast(5).split(separator: "~", omittingEmptySubsequences: false)
        let key = keyDir.split(separator: "~", maxSplits: 1, omittingEmptySubsequences: false)
        guard fields.count == 5, key.count == 2, key[0].count == 64,
            let resolvedAt = CacheNames.parseStamp(fields[0]), let ttl = Int(fields[2]),
            let flowID = fields[3].hasPrefix("#") ? String(fields[3]) : CacheNames.decode(fields[3]),
            let version = fields[4].hasPrefix("#") ? String(fields[4]) : CacheNames.decode(fields[4])
        else { return nil }
        let user = key[1].hasPrefix("#") ? nil : CacheNames.decode(key[1])
        return CachedFlow(
            placement: placement, fingerprint: String(key[0]), userID: user, flowID: flowID, version: version,
            resolvedAt: resolvedAt, ttlSeconds: ttl, size: size, path: path)
    }
}

/// One identity's flows written and queued for a group commit
/// (`CacheStore.stage`): `durable` gives each flow's result, in order, once
/// every one is durable or failed.
public final class StagedFlows: Sendable {
    private let results: Pending<[Result<CachedFlow, any Error>]>?
    /// Told the results instead, when given (`CacheStore.stage(…, then:)`).
    private let then: (@Sendable ([Result<CachedFlow, any Error>]) -> Void)?
    private let state: Mutex<(left: Int, results: [Result<CachedFlow, any Error>])>

    init(_ entries: [CachedFlow], then: (@Sendable ([Result<CachedFlow, any Error>]) -> Void)? = nil) {
        results = then == nil ? Pending() : nil
        self.then = then
        state = Mutex((entries.count, entries.map { .success($0) }))
    }

    /// Nothing to write: durable at once.
    init(done: [Result<CachedFlow, any Error>]) {
        let results = Pending<[Result<CachedFlow, any Error>]>()
        results.fulfil(done)
        (self.results, then) = (results, nil)
        state = Mutex((0, done))
    }

    /// Every flow's result, once all are durable or failed (the results
    /// `then` is told, for staging made with one).
    public var durable: [Result<CachedFlow, any Error>] {
        get async {
            guard let results else { return state.withLock { $0.results } }
            return await results.value
        }
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
        if let then { then(finished) } else { results?.fulfil(finished) }
    }
}

/// An entry's time and TTL in any of its shapes (`CacheScan.EntryFacts`,
/// `ListedFields`): fresh as `CachedFlow.isFresh` says, the one rule.
public protocol ResolvedWithTTL {
    var resolvedAt: Date { get }
    var ttlSeconds: Int { get }
}

extension ResolvedWithTTL {
    public func isFresh(at now: Date) -> Bool {
        CachedFlow.isFresh(resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, at: now)
    }
}
