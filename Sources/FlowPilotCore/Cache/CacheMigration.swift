import Foundation

/// Moving a format-1 cache to format 2 (docs/cache-format.md, "Migrating
/// from format 1"), under the exclusive lock, crash-safe at every step:
///
/// 1. whatever `log/` and `objects/` a killed migration left is removed
///    (in a format-1 cache only a migration writes there);
/// 2. each key's newest readable entry becomes an object (its flow, once per
///    distinct flow) and a record, each placement's newest alias a record;
///    read `chunk` entries at a time, their records appended to segments
///    written, synced and sealed as each fills;
/// 3. the marker is replaced by version 2's (a temporary synced, renamed
///    over it, the directory synced): the one instant the cache changes
///    format;
/// 4. `flows/` and `aliases/` are removed.
///
/// Killed before 3, the cache is format 1 as it was (its readers never look
/// at `log/` or `objects/`) and the next migration starts again; killed
/// after, it is format 2, and what is left of `flows/` and `aliases/` is
/// removed by the next migration, `prune` or `verify --repair`. Readers
/// that opened the cache as format 1 and miss after the switch look again
/// in the log; writers that did take the shared lock, which the migration
/// waits for, and write to the log once the marker says 2.
struct CacheMigration {
    let store: CacheStore

    /// Steps 1 to 4, the exclusive lock held.
    func run() throws -> CacheStore.Migration {
        var result = CacheStore.Migration(from: 1)
        // 1. A killed migration's work.
        for directory in [store.log.logDir, store.log.objectsDir] where access(directory, F_OK) == 0 {
            try? FileManager.default.removeItem(atPath: directory)
        }
        // 2. Records and objects.
        try carryOver(store.scan(log: false, flows: false), into: &result)
        FaultHook.reach("migrate-written")
        // 3. The switch.
        try AtomicFile.write(
            CacheStore.markerBody(version: 2), to: "\(store.root)/\(CacheStore.markerName)", overwrite: true)
        store.migratedSinceOpen.store(true, ordering: .relaxed)
        FaultHook.reach("migrate-switched")
        // 4. Format 1's trees.
        removeFormatOneTrees()
        return result
    }

    /// Format 1's entries (`flows/`, read in chunks as `readdir` lists it:
    /// `walkFormatOneFlows`) and the aliases in `scan` as records and objects
    /// (step 2), `migrationChunk` entries at a time: each chunk read across
    /// the cores, its new flows stored, its records appended to segments
    /// sealed as each fills, so memory holds one chunk, not every entry or
    /// the listing, whatever the cache's size. With `skip`, an entry the log
    /// already holds (`skip` says so) is not carried again.
    private func carryOver(
        _ scan: CacheScan, into result: inout CacheStore.Migration, skip: ((CachedFlow) -> Bool)? = nil
    ) throws {
        let aliasTargets = Set(scan.aliases.map(\.directoryKey))
        var targets: [String: LogRecord] = [:]
        var stored = Set<String>()
        try AtomicFile.makeDirectory(store.log.logDir)
        var output = FlowLog.SealedOutput(log: store.log)
        try store.walkFormatOneFlows(chunk: Self.chunk) { found in
            let chunk = skip.map { skip in found.filter { !skip($0) } } ?? found
            let slices = Parallel.mapSlices(Array(chunk), minimumPerSlice: 256) { slice in
                var read: [(CachedFlow, LogRecord?)] = []
                var objects: [String: Data] = [:]
                for entry in slice {
                    let migrated = Self.migrated(entry)
                    if let migrated, objects[migrated.record.flowSHA256] == nil {
                        objects[migrated.record.flowSHA256] = migrated.object
                    }
                    read.append((entry, migrated?.record))
                }
                return (read, objects)
            }
            for (read, objects) in slices {
                for (sha, bytes) in objects where stored.insert(sha).inserted {
                    try store.log.storeObject(bytes, sha256: sha)
                }
                for (entry, record) in read {
                    guard let record else {
                        // Carried over as what it was, a miss that is listed and a `verify` finding:
                        // a record whose flow is not there (an object name no flow has).
                        result.unreadable.append(store.relative(entry.path))
                        try output.append(Self.unreadableRecord(entry))
                        continue
                    }
                    try output.append(record)
                    if aliasTargets.contains(entry.directoryKey) { targets[entry.directoryKey] = record }
                    result.entries += 1
                }
            }
            FaultHook.reach("migrate-objects")
        }
        for alias in scan.aliases {
            guard let target = targets[alias.directoryKey] else { continue }
            let stamp = PathName.lastComponent(of: alias.path).prefix(while: { $0 != "~" })
            var record = store.aliasRecord(to: target)
            if let millis = Int64(stamp) { record.resolvedAtMillis = millis }
            try output.append(record)
            result.aliases += 1
        }
        _ = try output.finish()
        result.objects += stored.count
    }

    /// What is left of `flows/` and `aliases/` after the switch (a killed
    /// migration's step 4, or what a writer that opened the cache as format 1
    /// wrote there since: an older fpctl, or one that read the marker just
    /// before it changed) is carried into the log, never deleted: each entry
    /// newer than the log's record of its key becomes a record, as step 2
    /// makes them; then the trees are removed. The caller holds the
    /// exclusive lock, so no such writer is writing.
    @discardableResult
    func carryOverFormatOneTrees() throws -> CacheStore.Migration {
        var result = CacheStore.Migration(from: 2)
        guard access(store.flowsDir, F_OK) == 0 || access(store.aliasesDir, F_OK) == 0 else { return result }
        let leftovers = store.scan(log: false, flows: false)
        try carryOver(leftovers, into: &result) { entry in
            let logged = store.log.records(of: .entry(placement: entry.placement, fingerprint: entry.fingerprint))
            let millis = CacheStore.millis(entry.resolvedAt)
            return logged.contains { $0.resolvedAtMillis >= millis }
        }
        removeFormatOneTrees()
        return result
    }

    /// `flows/` and `aliases/`, after the switch.
    func removeFormatOneTrees() {
        for directory in [store.flowsDir, store.aliasesDir] where access(directory, F_OK) == 0 {
            try? FileManager.default.removeItem(atPath: directory)
        }
        try? AtomicFile.syncDirectory(store.root)
    }

    /// A format-1 entry as format 2's record and object; nil when it does
    /// not read back whole (a miss before, left out).
    private static func migrated(_ entry: CachedFlow) -> LoggedEntries.Entry? {
        guard let data = FileManager.default.contents(atPath: entry.path),
            case (let doc?, _, nil) = CacheStore.inspectEntry(entry, data: data), let json = try? JSONValue.parse(data),
            let user = json["user_id"]?.stringValue, let fingerprint = json["fingerprint"]?.stringValue,
            let placement = json["placement"]?.stringValue
        else { return nil }
        let tier = json["tier"]?.stringValue.flatMap(Tier.init(rawValue:)) ?? .network
        let flow = doc.canonical
        let record = LogRecord(
            kind: .entry, tier: tier, resolvedAtMillis: CacheStore.millis(entry.resolvedAt),
            unique: CacheStore.recordUniques.add(1, ordering: .relaxed).newValue,
            ttlSeconds: UInt32(clamping: max(0, entry.ttlSeconds)), fingerprint: fingerprint, placement: placement,
            userID: user, flowSHA256: flow.sha256, flowSize: UInt32(clamping: flow.data.count),
            contentHash: doc.contentHash, flowID: doc.id, version: doc.version)
        var logged = CachedFlow(
            placement: placement, fingerprint: fingerprint, userID: user, flowID: doc.id, version: doc.version,
            resolvedAt: entry.resolvedAt, ttlSeconds: entry.ttlSeconds, size: Int64(flow.data.count), path: "")
        logged.inLog = true
        return LoggedEntries.Entry(record: record, object: flow.data, entry: logged)
    }

    /// Entries a migration reads across the cores and stores at a time; their
    /// records go into segments of the roll size as they come.
    static let chunk = 4_096

    /// No flow's SHA-256: what a carried-over unreadable entry points at.
    static let missingObject = String(repeating: "0", count: 64)

    /// An unreadable format-1 entry as a record, from what its name says.
    private static func unreadableRecord(_ entry: CachedFlow) -> LogRecord {
        LogRecord(
            kind: .entry, tier: .network, resolvedAtMillis: CacheStore.millis(entry.resolvedAt),
            unique: CacheStore.recordUniques.add(1, ordering: .relaxed).newValue,
            ttlSeconds: UInt32(clamping: max(0, entry.ttlSeconds)), fingerprint: entry.fingerprint,
            placement: entry.placement,
            userID: entry.userID ?? entry.keyName.drop { $0 != "~" }.dropFirst().description,
            flowSHA256: missingObject, flowID: entry.flowID, version: entry.version)
    }
}
