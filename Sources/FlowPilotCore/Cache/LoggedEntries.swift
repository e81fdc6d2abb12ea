import Foundation
import Synchronization

/// Format 2's flow entries (`FlowLog`; docs/cache-format.md, "Format 2"): a
/// record an entry or alias appended to this process's segment in `log/`,
/// the flow's bytes an object in `objects/` named by their SHA-256, written
/// before the record that points at them, under the shared lock.
struct LoggedEntries: FlowEntries {
    let store: CacheStore

    /// An entry's record and its flow's bytes (the object).
    struct Entry {
        let record: LogRecord
        let object: Data
        let entry: CachedFlow
    }

    func entry(_ flow: FlowToStore, identity: Identity, tier: Tier, resolvedAt: Date) -> Entry {
        let canonical = flow.document.canonical
        let record = LogRecord(
            kind: .entry, tier: tier, resolvedAtMillis: CacheStore.millis(resolvedAt),
            unique: CacheStore.recordUniques.add(1, ordering: .relaxed).newValue,
            ttlSeconds: UInt32(clamping: max(0, flow.ttlSeconds)), fingerprint: identity.fingerprint,
            placement: flow.placement, userID: identity.userID, flowSHA256: canonical.sha256,
            flowSize: UInt32(clamping: canonical.data.count), contentHash: flow.document.contentHash,
            flowID: flow.document.id, version: flow.document.version)
        return Entry(record: record, object: canonical.data, entry: store.cachedFlow(record, path: store.log.logDir))
    }

    func staging(_ flows: [FlowToStore], identity: Identity, tier: Tier, resolvedAt: Date, commit: GroupCommit)
        -> (entries: [CachedFlow], write: @Sendable (StagedFlows) -> Void)
    {
        let logged = flows.map { entry($0, identity: identity, tier: tier, resolvedAt: resolvedAt) }
        return (logged.map(\.entry), { [self] in store.stageQueue.add(logged, staged: $0, for: self) })
    }

    func store(_ flow: FlowToStore, identity: Identity, tier: Tier, resolvedAt: Date, pointAlias: Bool) throws
        -> CachedFlow
    {
        let logged = entry(flow, identity: identity, tier: tier, resolvedAt: resolvedAt)
        try store.withLock(exclusive: false) {
            // One write a hold: its tenure would tell nothing a `stat` does not.
            try storeObjects([logged], tenure: nil)
            var records = [logged.record]
            if pointAlias { records.append(store.aliasRecord(to: logged.record)) }
            try store.logWriter.append(records)
        }
        return logged.entry
    }

    func enqueue(
        _ flow: FlowToStore, identity: Identity, tier: Tier, resolvedAt: Date, commit: GroupCommit,
        waiter: any CommitWaiter
    ) throws -> CachedFlow {
        // The writer's own group commit makes records durable: `commit` is format 1's.
        let logged = entry(flow, identity: identity, tier: tier, resolvedAt: resolvedAt)
        let lock = try CacheStore.Lock(path: store.lockPath, exclusive: false)
        do { try storeObjects([logged], tenure: lock.tenure) } catch {
            lock.release()
            throw error
        }
        store.logWriter.enqueue([logged.record]) { error in
            lock.release()
            waiter.committed(error)
        }
        return logged.entry
    }

    func pointAlias(to entry: CachedFlow, ifPresent: Bool) throws {
        try store.withLock(exclusive: false) {
            if ifPresent,
                store.log.records(of: .entry(placement: entry.placement, fingerprint: entry.fingerprint)).isEmpty
            {
                return
            }
            let alias = LogRecord(
                kind: .alias, tier: .network, resolvedAtMillis: CacheStore.millis(entry.resolvedAt),
                unique: CacheStore.recordUniques.add(1, ordering: .relaxed).newValue, ttlSeconds: 0,
                fingerprint: entry.fingerprint, placement: entry.placement, userID: entry.userID ?? "")
            try store.logWriter.append([alias])
        }
    }

    func lookup(placement: String, identity: Identity) -> (CachedFlow, FlowDocument)? {
        lookup(placement: placement, fingerprint: identity.fingerprint)
    }

    func lookup(placements: [String], identity: Identity) -> [(CachedFlow, FlowDocument)?] {
        let keys = placements.map { LogKey.entry(placement: $0, fingerprint: identity.fingerprint) }
        return store.log.located(of: keys).map(serving)
    }

    /// The newest record of a key whose flow reads back whole, validates and is the flow the record names.
    private func lookup(placement: String, fingerprint: String) -> (CachedFlow, FlowDocument)? {
        serving(store.log.located(of: .entry(placement: placement, fingerprint: fingerprint)))
    }

    /// Of a key's records, newest first, the first that serves.
    private func serving(_ records: [FlowLog.Located]) -> (CachedFlow, FlowDocument)? {
        for located in records {
            let path = "\(store.log.logDir)/\(located.segment)#\(located.offset)"
            guard let doc = store.objectDocument(located.record.flowSHA256, location: path),
                doc.id.sameBytes(as: located.record.flowID)
            else { continue }
            return (store.cachedFlow(located.record, path: path), doc)
        }
        return nil
    }

    func lookupAlias(placement: String) -> (CachedFlow, FlowDocument)? {
        guard let alias = store.log.newestAlias(placement: placement) else { return nil }
        return lookup(placement: placement, fingerprint: alias.fingerprint)
    }

    static let names = ["log", "objects"]
    var directories: [String] { Self.names }

    /// Format 1's trees: in a format-2 cache, what a migration had yet to remove.
    var predecessors: [String] { FileEntries.names }

    /// Its flow's bytes missing, not matching their digest, not a valid
    /// flow, or not the flow the record names.
    func problem(of entry: CachedFlow) -> String? {
        guard let sha = entry.flowSHA256 else { return "record unreadable" }
        if sha == CacheMigration.missingObject {
            return "unreadable in format 1, carried over as a miss by the migration"
        }
        guard let doc = store.objectDocument(sha, location: entry.path) else {
            guard access(store.log.objectPath(sha), F_OK) == 0 else { return "flow bytes missing (objects/\(sha))" }
            guard let bytes = store.log.readObject(sha) else { return "flow bytes do not match flow_sha256" }
            let (_, findings) = FlowDocument.validate(data: bytes, location: entry.path)
            return "flow fails validation: \(findings.first?.line ?? "")"
        }
        guard doc.id.sameBytes(as: entry.flowID) else { return "metadata disagrees with the flow (flow id \(doc.id))" }
        return nil
    }

    func document(of entry: CachedFlow) -> FlowDocument? {
        entry.flowSHA256.flatMap { store.objectDocument($0, location: entry.path) }
    }

    func isUser(_ user: String, of entry: CachedFlow) -> Bool { entry.userID.sameBytes(as: user) }

    /// Its key's survivor (`FlowLog.survivor`): the record a lookup serves.
    func target(of alias: CacheScan.Alias) -> CachedFlow? {
        let fingerprint = String(alias.target.prefix { $0 != "~" })
        var servable = FlowLog.Servable(store.log)
        guard
            let survivor = try? store.log.survivor(
                of: .entry(placement: alias.placement, fingerprint: fingerprint), in: store.log.segments(),
                servable: &servable)
        else { return nil }
        return store.cachedFlow(survivor.record, path: survivor.path)
    }

    /// From `log/summary.json`, while `log/` holds exactly what it names (`LogSummary.current`).
    func restingCounts(at now: Date) -> RestingCounts? {
        guard let resting = LogSummary.current(store.log) else { return nil }
        let nowMillis = CacheStore.millis(now)
        var counts: [(name: String, entries: Int, fresh: Int, bytes: Int64)] = []
        for placement in resting.placements {
            guard let fresh = placement.fresh(at: nowMillis) else { return nil }
            counts.append((placement.placement, placement.entries, fresh, placement.bytes))
        }
        return RestingCounts(
            counts: counts, aliases: resting.aliases.map(CacheNames.placement),
            oldest: resting.placements.map(\.oldest).min().map(LogRecord.date(millis:)),
            newest: resting.placements.map(\.newest).max().map(LogRecord.date(millis:)))
    }

    /// From each segment's index and facts (`FactsSurvey`), when they can answer.
    func surveyedCounts(at now: Date) -> RestingCounts? {
        guard let counted = FactsSurvey(store.log)?.counts(at: now) else { return nil }
        return RestingCounts(
            counts: counted.placements, aliases: counted.aliases.map(CacheNames.placement),
            oldest: counted.oldest.map(LogRecord.date(millis:)), newest: counted.newest.map(LogRecord.date(millis:)))
    }

    /// A record (`<cache>/log/<segment>#<offset>`), a segment or its index:
    /// what a compaction repairs, not an unlink.
    func isRecord(_ path: String) -> Bool {
        // As bytes, no string made: a prune asks this of each of millions of removals.
        let logDir = store.log.logDir
        return path.startsWithBytes(logDir) && path.utf8.dropFirst(logDir.utf8.count).first == UInt8(ascii: "/")
            && (path.utf8.contains(UInt8(ascii: "#")) || path.endsWithBytes(LogSegment.suffix)
                || path.endsWithBytes(LogSegment.suffix + LogSegment.indexSuffix))
    }

    /// One compaction of the whole log (`FlowLog.compact`).
    func removeRecords(dropping drops: (LogRecord, String) -> Bool) throws -> RemovedRecords {
        let compaction = try store.log.compact { record, path in !drops(record, path) }
        return RemovedRecords(
            objects: compaction.removedObjects.map { (store.log.objectPath($0.name), $0.size) },
            notRemoved: compaction.notRemoved)
    }

    /// `log/`, surveyed unless `survey` is false, or `objects/`.
    func scan(_ directory: String, into scan: inout CacheScan, flows: Bool, survey: LogSurvey.Mode) {
        guard directory == "objects" else { return store.scanLog(into: &scan, survey: survey) }
        store.scanObjects(into: &scan)
    }

    /// Identities' flows staged (`stage`) and not yet written: the first
    /// one queued while none is being written starts a drain on a
    /// blocking-I/O thread, which takes everything queued, writes it as one
    /// batch (`write`), and goes on while more was queued meanwhile. Under
    /// load, a batch is every identity whose answer landed while the last
    /// batch was written: one trip to the blocking-I/O threads, one hold of
    /// the shared lock and one group commit a batch, where each identity
    /// took a trip and a hold of its own and its records were handed to a
    /// second thread to commit (two threads woken and a `flock` an identity;
    /// groups of three entries on a tmpfs).
    final class StageQueue: Sendable {
        struct Item: Sendable {
            let entries: [Entry]
            let staged: StagedFlows
        }

        private let state = Mutex<(waiting: [Item], draining: Bool)>(([], false))
        /// Batches drained so far, and their identities (tests read them).
        let drained = Mutex<(batches: Int, items: Int)>((0, 0))

        func add(_ entries: [Entry], staged: StagedFlows, for writer: LoggedEntries) {
            let start = state.withLock { state -> Bool in
                state.waiting.append(Item(entries: entries, staged: staged))
                defer { state.draining = true }
                return !state.draining
            }
            if start { BlockingIO.submit { self.drain(writer) } }
        }

        private func drain(_ writer: LoggedEntries) {
            var batch = take()
            var lock = batch.isEmpty ? nil : writer.holdShared()
            while !batch.isEmpty {
                let written = writer.write(batch, holding: lock)
                // The next batch's hold is taken before this one's is released: under load the holds
                // overlap, so the lock's descriptor is locked once and its tenure lasts (no `flock`, and no
                // `stat` of a known object, a batch). Released before anyone is told, as a batch of one
                // identity was.
                let next = take()
                let nextLock = next.isEmpty ? nil : writer.holdShared()
                if case .success(let held) = lock { held.release() }
                written.tell()
                (batch, lock) = (next, nextLock)
            }
        }

        /// Everything queued, or nothing (and the drain ends: the next `add` starts another).
        private func take() -> [Item] {
            let batch = state.withLock { state -> [Item] in
                defer { state.waiting.removeAll(keepingCapacity: true) }
                if state.waiting.isEmpty { state.draining = false }
                return state.waiting
            }
            if !batch.isEmpty {
                drained.withLock {
                    $0.batches += 1
                    $0.items += batch.count
                }
            }
            return batch
        }
    }

    /// A hold of the shared lock for a batch of `stage`'s writes.
    fileprivate func holdShared() -> Result<CacheStore.Lock, any Error> {
        Result { try CacheStore.Lock(path: store.lockPath, exclusive: false) }
    }

    /// What a batch's write leaves to tell: the identities whose records it
    /// appended, and the append's error (nil once they are durable).
    fileprivate struct Written {
        var items: [StageQueue.Item] = []
        var failure: (any Error)?
        /// Identities whose objects could not be stored, each with its error.
        var failed: [(item: StageQueue.Item, error: any Error)] = []

        func tell() {
            for (item, error) in failed { item.staged.finishAll(error) }
            for item in items { item.staged.finishAll(failure) }
        }
    }

    /// `stage`'s writes for a batch of identities, on the drain's
    /// blocking-I/O thread, under `lock` (the shared lock, held until their
    /// records are durable): each identity's objects stored, then every
    /// record of those whose objects were stored appended in one `pwrite`
    /// and made durable by one `fdatasync` (the writer's group commit,
    /// `FlowLog.Writer.append`), here: the batch is the group, and whoever
    /// queues meanwhile is the next one, with no second thread woken to
    /// commit it. An identity whose object could not be stored fails alone.
    /// The caller tells them all, once it has released the lock.
    fileprivate func write(_ batch: [StageQueue.Item], holding lock: Result<CacheStore.Lock, any Error>?) -> Written {
        var written = Written()
        switch lock {
        case .success(let held):
            var records: [LogRecord] = []
            written.items.reserveCapacity(batch.count)
            for item in batch {
                do { try storeObjects(item.entries, tenure: held.tenure) } catch {
                    written.failed.append((item, error))
                    continue
                }
                written.items.append(item)
                records += item.entries.lazy.map(\.record)
            }
            if !records.isEmpty {
                do { try store.logWriter.append(records) } catch { written.failure = error }
            }
        case .failure(let error):
            (written.items, written.failure) = (batch, error)
        case nil:
            break
        }
        return written
    }

    /// Stores the flows' bytes that are not there: a `stat` per distinct flow
    /// of the batch, unless this process knew it durable in the same tenure
    /// of the shared lock (`CacheStore.Lock.tenure`): a `prune` or `clear`
    /// between two tenures may have removed one this process stored. The
    /// caller holds the shared lock until the records pointing at them are
    /// durable, so no compaction removes an object between the two.
    private func storeObjects(_ entries: [Entry], tenure: UInt64?) throws {
        // An identity's few flows: an object named before in the batch is found by looking back.
        for index in entries.indices {
            let sha256 = entries[index].record.flowSHA256
            if entries[..<index].contains(where: { $0.record.flowSHA256.sameBytes(as: sha256) }) { continue }
            try store.log.storeObject(entries[index].object, sha256: sha256, tenure: tenure)
        }
    }
}
