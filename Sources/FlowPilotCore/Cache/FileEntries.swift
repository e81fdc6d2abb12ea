import Foundation

/// Format 1's flow entries (docs/cache-format.md, "Format 1"): a file an
/// entry, `flows/<placement>/<fingerprint>~<user>/<stamp>~<ttl>~<flow
/// id>~<version>.json`, the key's older files removed once it is durable,
/// and an empty file an alias, `aliases/<placement>/<stamp>~<key>`. Kept for
/// reading devices' caches in place and for `FPCTL_CACHE_FORMAT=1`.
struct FileEntries: FlowEntries {
    let store: CacheStore

    static let names = ["flows", "aliases"]
    var directories: [String] { Self.names }

    func scan(_ directory: String, into scan: inout CacheScan, flows: Bool, survey: LogSurvey.Mode) {
        if directory == "aliases" {
            store.scanAliases(into: &scan)
        } else if flows {
            store.scanFlows(into: &scan)
        }
    }

    /// Format 1 is the first: nothing migrates to it.
    var predecessors: [String] { [] }

    func problem(of entry: CachedFlow) -> String? { CacheStore.inspectEntry(entry)?.2 }

    func document(of entry: CachedFlow) -> FlowDocument? { CacheStore.readEntry(entry)?.0 }

    /// By its key directory's name (`<fingerprint>~<user>/`), as a walk reads entries by name.
    func isUser(_ user: String, of entry: CachedFlow) -> Bool {
        entry.path.containsBytes("~" + CacheNames.bounded(user, max: CacheStore.maxNameField) + "/")
    }

    /// The newest entry file of the key directory the alias names, as the walk takes it (`scanKey`).
    func target(of alias: CacheScan.Alias) -> CachedFlow? {
        let keyDir = "\(store.flowsDir)/\(alias.directoryKey)"
        for item in CacheStore.published(keyDir).reversed() {
            if let entry = CacheStore.parseEntryName(
                placement: alias.placement, keyDir: alias.target, name: item.name, size: item.size,
                path: "\(keyDir)/\(item.name)")
            {
                return entry
            }
        }
        return nil
    }

    /// Format 1 keeps no summary: `info` walks its entries.
    func restingCounts(at now: Date) -> RestingCounts? { nil }

    func surveyedCounts(at now: Date) -> RestingCounts? { nil }

    /// Format 1's entries are files, each removed by `unlink`.
    func isRecord(_ path: String) -> Bool { false }

    func removeRecords(dropping drops: (LogRecord, String) -> Bool) throws -> RemovedRecords {
        RemovedRecords()
    }

    func staging(_ flows: [FlowToStore], identity: Identity, tier: Tier, resolvedAt: Date, commit: GroupCommit)
        -> (entries: [CachedFlow], write: @Sendable (StagedFlows) -> Void)
    {
        FaultHook.reach("format-1-decided")
        let prepared = flows.map {
            flowEntry(
                placement: $0.placement, identity: identity, document: $0.document, ttlSeconds: $0.ttlSeconds,
                tier: tier, resolvedAt: resolvedAt)
        }
        return (
            prepared.map(\.entry),
            { [self] staged in BlockingIO.submit { write(prepared, to: staged, commit: commit) } }
        )
    }

    func store(_ flow: FlowToStore, identity: Identity, tier: Tier, resolvedAt: Date, pointAlias: Bool) throws
        -> CachedFlow
    {
        FaultHook.reach("format-1-decided")
        let prepared = flowEntry(
            placement: flow.placement, identity: identity, document: flow.document, ttlSeconds: flow.ttlSeconds,
            tier: tier, resolvedAt: resolvedAt)
        let (entry, keyDir, name) = (prepared.entry, prepared.keyDir, prepared.name)
        try store.withLock(exclusive: false) {
            try AtomicFile.publish(prepared.data, directory: keyDir, name: name, mtime: resolvedAt)
            CacheStore.removeOlder(in: keyDir, keeping: name)
            if pointAlias { try publishAlias(to: entry) }
        }
        return entry
    }

    func enqueue(
        _ flow: FlowToStore, identity: Identity, tier: Tier, resolvedAt: Date, commit: GroupCommit,
        waiter: any CommitWaiter
    ) throws -> CachedFlow {
        FaultHook.reach("format-1-decided")
        let prepared = flowEntry(
            placement: flow.placement, identity: identity, document: flow.document, ttlSeconds: flow.ttlSeconds,
            tier: tier, resolvedAt: resolvedAt)
        // The shared lock is held from the write until the entry is durable and its older files are gone.
        let lock = try CacheStore.Lock(path: store.lockPath, exclusive: false)
        do {
            let file = try stageEntry(prepared, commit: commit)
            commit.enqueue(file, waiter: EntryCommit(prepared, file, then: .one(lock, waiter)))
        } catch {
            lock.release()
            throw error
        }
        return prepared.entry
    }

    func pointAlias(to entry: CachedFlow, ifPresent: Bool) throws {
        try store.withLock(exclusive: false) {
            if !ifPresent || access(entry.path, F_OK) == 0 { try publishAlias(to: entry) }
        }
    }

    func lookup(placement: String, identity: Identity) -> (CachedFlow, FlowDocument)? {
        let key = store.keyDirName(fingerprint: identity.fingerprint, userID: identity.userID)
        return newestEntry(placement: placement, keyDir: "\(store.placementDir(placement))/\(key)")
    }

    func lookupAlias(placement: String) -> (CachedFlow, FlowDocument)? {
        guard let alias = CacheStore.published("\(store.aliasesDir)/\(CacheNames.placement(placement))").last else {
            return nil
        }
        let parts = alias.name.split(separator: "~", maxSplits: 2)
        guard parts.count == 3 else { return nil }
        return newestEntry(placement: placement, keyDir: "\(store.placementDir(placement))/\(parts[2])")
    }

    /// `stage`'s writes, on a blocking-I/O thread. One shared lock for the
    /// batch, from the first write until every entry is durable (or failed)
    /// and its key's older files are gone.
    private func write(_ prepared: [PreparedEntry], to staged: StagedFlows, commit: GroupCommit) {
        let lock: CacheStore.Lock
        do { lock = try CacheStore.Lock(path: store.lockPath, exclusive: false) } catch {
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
            case batch(StagedFlows, Int, CacheStore.Lock)
            /// `storeFlow`'s one entry: its lock released, then its waiter told.
            case one(CacheStore.Lock, any CommitWaiter)
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
        let data = CacheStore.entryData(
            placement: placement, identity: identity, document: document, ttlSeconds: ttlSeconds, tier: tier,
            resolvedAt: resolvedAt)
        let keyDir =
            "\(store.placementDir(placement))/\(store.keyDirName(fingerprint: identity.fingerprint, userID: identity.userID))"
        let name = CacheStore.entryName(
            stamp: CacheNames.stamp(resolvedAt), ttlSeconds: ttlSeconds, flowID: document.id,
            version: document.version)
        let entry = CachedFlow(
            placement: placement, fingerprint: identity.fingerprint, userID: identity.userID, flowID: document.id,
            version: document.version, resolvedAt: resolvedAt, ttlSeconds: ttlSeconds,
            size: Int64(data.count), path: "\(keyDir)/\(name)")
        return PreparedEntry(entry: entry, data: data, keyDir: keyDir, name: name)
    }

    private func publishAlias(to entry: CachedFlow) throws {
        let aliasDir = "\(store.aliasesDir)/\(CacheNames.placement(entry.placement))"
        let aliasName = "\(CacheNames.stamp(entry.resolvedAt))~\(entry.keyName)"
        try AtomicFile.publish(Data(), directory: aliasDir, name: aliasName, mtime: entry.resolvedAt)
        CacheStore.removeOlder(in: aliasDir, keeping: aliasName)
    }

    private func newestEntry(placement: String, keyDir: String) -> (CachedFlow, FlowDocument)? {
        guard let newest = CacheStore.published(keyDir).last,
            let entry = CacheStore.parseEntryName(
                placement: placement, keyDir: PathName.lastComponent(of: keyDir),
                name: newest.name, size: 0, path: "\(keyDir)/\(newest.name)")
        else { return nil }
        guard let (doc, size) = CacheStore.readEntry(entry) else { return nil }
        return (
            CachedFlow(
                placement: entry.placement, fingerprint: entry.fingerprint, userID: entry.userID, flowID: entry.flowID,
                version: entry.version, resolvedAt: entry.resolvedAt, ttlSeconds: entry.ttlSeconds, size: size,
                path: entry.path), doc
        )
    }
}
