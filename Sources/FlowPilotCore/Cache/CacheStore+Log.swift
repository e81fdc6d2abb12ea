import Foundation
import Synchronization

/// What format 2's entries (`LoggedEntries`), its migration and its scans
/// share of the store: whether the cache is format 2, record uniques, a
/// record as a `CachedFlow`, flow objects read once. Images, fonts and icons
/// are stored as in format 1.
extension CacheStore {
    /// Whether this cache keeps its flows in a log (format 2).
    var usesLog: Bool { version >= 2 }

    /// Whether a write goes to the log: the cache is format 2, or was
    /// migrated since it was opened as format 1.
    var writesLog: Bool { usesLog || currentVersion() >= 2 }

    /// Record uniques: one process's increase by one from a random start
    /// below 2^63, so a writer's later record of a key in the same
    /// millisecond wins, and two writers' are as unlikely to meet as two
    /// random numbers.
    static let recordUniques = Atomic<UInt64>(UInt64.random(in: 0..<(1 << 63)))

    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    /// What a record is as a `CachedFlow`; `path` is where it was read
    /// (`log/<segment>#<offset>`), or the log directory for one being written.
    func cachedFlow(_ record: LogRecord, path: String) -> CachedFlow { Self.cachedFlow(record, path: path) }

    /// `cachedFlow` of a record read in place: no string made that a `CachedFlow` does not hold.
    static func cachedFlow(_ view: LogRecord.View, path: String) -> CachedFlow {
        func text(_ bytes: UnsafeRawBufferPointer) -> String { String(decoding: bytes, as: UTF8.self) }
        return CachedFlow(
            placement: text(view.placement), fingerprint: Digest.hex(view.fingerprint), userID: text(view.userID),
            flowID: text(view.flowID), version: text(view.slice(view.versionRange)),
            resolvedAt: LogRecord.date(millis: view.resolvedAtMillis), ttlSeconds: Int(view.ttlSeconds),
            size: Int64(view.flowSize), path: path, inLog: true, flowSHA256: Digest.hex(view.flowSHA256))
    }

    static func cachedFlow(_ record: LogRecord, path: String) -> CachedFlow {
        CachedFlow(
            placement: record.placement, fingerprint: record.fingerprint, userID: record.userID,
            flowID: record.flowID, version: record.version, resolvedAt: record.resolvedAt,
            ttlSeconds: Int(record.ttlSeconds), size: Int64(record.flowSize), path: path, inLog: true,
            flowSHA256: record.flowSHA256)
    }

    /// A placement's alias pointing at an entry's key.
    func aliasRecord(to record: LogRecord) -> LogRecord {
        LogRecord(
            kind: .alias, tier: record.tier, resolvedAtMillis: record.resolvedAtMillis,
            unique: Self.recordUniques.add(1, ordering: .relaxed).newValue, ttlSeconds: 0,
            fingerprint: record.fingerprint, placement: record.placement, userID: record.userID)
    }

    /// A flow object read, checked against its name and validated, once a
    /// process per object (objects never change: the name is the bytes'
    /// digest); nil when it is missing or damaged, which is asked again.
    func objectDocument(_ sha256: String, location: String) -> FlowDocument? {
        if let known = objectDocuments.withLock({ $0[sha256] }) { return known }
        guard let bytes = log.readObject(sha256), let doc = FlowDocument.validate(data: bytes, location: location).0
        else { return nil }
        objectDocuments.withLock { documents in
            if documents.count >= 256 { documents.removeAll() }
            documents[sha256] = doc
        }
        return doc
    }

}

extension CacheStore {
    /// `log/`: surveyed (`LogSurvey`), so that each `CacheScan.walk` reads
    /// every record once and knows, of each key, the entry a lookup serves
    /// (the newest whose flow reads back whole, `FlowLog.Servable`; the
    /// newest of all when none does, which `verify` then reports) and the
    /// records superseded (what the next compaction drops); the segments,
    /// indexes and foreign files listed. A record's path is
    /// `<cache>/log/<segment>#<offset>`.
    func scanLog(into scan: inout CacheScan, survey: LogSurvey.Mode = .records) {
        switch survey {
        case .none: break
        case .records: scan.logWalk = LogWalk(log: log, survey: LogSurvey(log))
        case .facts: scan.logWalk = LogWalk(log: log, survey: LogSurvey.decidedByFacts(log) ?? LogSurvey(log))
        }
        let listing = DirectoryWalker.list(log.logDir) ?? []
        let names = Set(listing.map(\.name))
        for item in listing where !Self.isFileSystemName(item.name) {
            let file = CacheScan.File(path: "\(log.logDir)/\(item.name)", size: item.size, mtime: item.mtime)
            if item.name.hasPrefix(AtomicFile.tempPrefix) {
                scan.temporaries.append(file)
            } else if item.name.hasSuffix(LogSegment.suffix) && !item.isDirectory {
                scan.segments.append(file)
            } else if item.name == LogSummary.fileName && !item.isDirectory {
                continue  // What `info` reads of a log at rest (`LogSummary`); any other command ignores it.
            } else if item.name.hasSuffix(LogSegment.suffix + SegmentFacts.suffix) && !item.isDirectory {
                // What `info` reads of a sealed segment (`SegmentFacts`); `verify` checks it (`SegmentFacts.problem`).
                scan.segments.append(file)
            } else if item.name.hasSuffix(LogSegment.suffix + LogSegment.indexSuffix) && !item.isDirectory {
                scan.segments.append(file)
                // `log.scan` checked the index of each segment it read; one whose segment is gone is checked here.
                if names.contains(String(item.name.dropLast(LogSegment.indexSuffix.count))) { continue }
                if FileManager.default.contents(atPath: file.path).flatMap({ SegmentIndex.check(Array($0)) }) == nil {
                    scan.logProblems.append((file.path, "index damaged (lookups scan its segment)", false))
                }
            } else {
                scan.foreign.append(file)
            }
        }
    }

    /// `objects/`: a file per distinct flow, named by its SHA-256.
    func scanObjects(into scan: inout CacheScan) {
        for item in DirectoryWalker.list(log.objectsDir) ?? [] where !Self.isFileSystemName(item.name) {
            let file = CacheScan.File(path: "\(log.objectsDir)/\(item.name)", size: item.size, mtime: item.mtime)
            if item.name.hasPrefix(AtomicFile.tempPrefix) {
                scan.temporaries.append(file)
            } else if item.name.utf8.count == 64, LogRecord.rawHex(Substring(item.name)) != nil, !item.isDirectory {
                scan.objects.append(file)
            } else {
                scan.foreign.append(file)
            }
        }
    }
}

extension CacheStore {
    /// More small segments than this, and a finishing writer merges them.
    static let crowdedSegments = 16

    /// A writer's last act (`warm`, `cache put`, `resolve`, `ready`): its
    /// segment sealed, so lookups probe its index; then, if `log/` holds more
    /// than `crowdedSegments` small segments (short runs', killed writers'),
    /// they are merged into one, if the exclusive lock can be had at once
    /// (no writer writing: otherwise a later finisher does it). Failures
    /// cost nothing but speed and are not reported.
    public func finishWriting() {
        guard writesLog else { return }
        try? logWriter.close()
        let small = log.segments().filter { segment in
            var info = stat()
            return stat(segment.path, &info) == 0 && Int(info.st_size) < log.rollBytes / 2
        }
        guard small.count > Self.crowdedSegments,
            let lock = try? Lock(path: lockPath, exclusive: true, waiting: false)
        else { return }
        defer { lock.release() }
        try? log.merge(log.segments().filter { segment in small.contains { $0.name == segment.name } })
    }
}
