import Foundation
import Synchronization

/// The flows of a format-2 cache (docs/cache-format.md, "Format 2"): each
/// distinct flow's bytes stored once in `objects/<sha256>`, and small records
/// in append-only segments `log/` pointing at them, one record an entry.
/// An entry costs its record (about 200 bytes) and an index slot, not a
/// directory, a file and their blocks.
///
/// Reading needs no lock and no index of the whole cache: a lookup lists
/// `log/`, probes each sealed segment's index for the key, scans the
/// segments still being written, and takes the newest record of the key
/// whose flow reads back whole.
public final class FlowLog: Sendable {
    public let root: String
    let logDir: String
    let objectsDir: String

    /// What this process knows of `log/` between lookups.
    let view: LogView

    /// The size at which a segment is full and sealed (`LogSegment.rollBytes`).
    let rollBytes: Int

    /// The objects this process knows are durable under their names, by
    /// name and inode (one pruned and stored again is another inode).
    /// Asked for every flow a warm writes, from every blocking-I/O thread at
    /// once; learned once an object: read-mostly. With each, the shared
    /// lock's tenure in which it was last seen (`CacheStore.Lock.tenure`).
    private let durableObjects = ReadMostly<[String: (inode: UInt64, tenure: UInt64?)]>([:])

    init(root: String, rollBytes: Int = LogSegment.rollBytes) {
        self.root = root
        (logDir, objectsDir) = ("\(root)/log", "\(root)/objects")
        self.rollBytes = rollBytes
        view = LogView(logDir: logDir)
    }

    // MARK: Segments

    struct Segment: Sendable {
        let name: String
        let path: String
        /// The index's path, when the segment is sealed.
        let index: String?
        /// Where its facts are, if its writer wrote them (`SegmentFacts`).
        var facts: String { path + SegmentFacts.suffix }
    }

    /// The segments in `log/`, by name (oldest writer first).
    func segments() -> [Segment] {
        let names = (DirectoryWalker.list(logDir, stat: false) ?? []).map(\.name)
        let indexes = Set(names.filter { $0.hasSuffix(LogSegment.suffix + LogSegment.indexSuffix) })
        return names.filter { $0.hasSuffix(LogSegment.suffix) && !$0.hasPrefix(".") }.sorted().map { name in
            let index = name + LogSegment.indexSuffix
            return Segment(
                name: name, path: "\(logDir)/\(name)", index: indexes.contains(index) ? "\(logDir)/\(index)" : nil)
        }
    }

    /// A segment that went away between the listing and its reading: a
    /// compaction copied it and removed it. The lookup lists again.
    struct Vanished: Error {}

    /// A record and where it is: its segment's name and its offset there.
    struct Located: Sendable {
        let record: LogRecord
        let segment: String
        let offset: Int
    }

    /// Every record of `key` in the cache, newest first (`LogView`: each
    /// sealed segment's index probed, each unsealed one's new bytes read
    /// once and remembered).
    func located(of key: LogKey) -> [Located] { located(of: [key])[0] }

    /// `located(of:)` of several keys, from one look at the log (`LogView.located(of:)`).
    func located(of keys: [LogKey]) -> [[Located]] {
        let now = LogRecord.nowMillis
        return view.located(of: keys).map { $0.sorted { $0.record.wins(over: $1.record, now: now) } }
    }

    /// Every record of `key`, newest first.
    func records(of key: LogKey) -> [LogRecord] { located(of: key).map(\.record) }

    /// As `records(of:)` from a listing made earlier; throws `Vanished` when a segment it names is gone.
    func records(of key: LogKey, in segments: [Segment]) throws -> [Located] {
        var found: [Located] = []
        for segment in segments {
            let fd = open(segment.path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                if errno == ENOENT { throw Vanished() }
                continue
            }
            defer { close(fd) }
            var scanFrom = LogSegment.magic.count
            if let indexPath = segment.index {
                let indexFD = open(indexPath, O_RDONLY | O_CLOEXEC)
                if indexFD < 0 && errno == ENOENT { throw Vanished() }
                if indexFD >= 0 {
                    defer { close(indexFD) }
                    if let index = SegmentIndex.checked(indexFD, segmentLength: Self.length(fd)) {
                        for offset in SegmentIndex.offsets(indexFD, index, prefix: key.prefix) {
                            if let record = Self.record(fd, at: offset), key.matches(record) {
                                found.append(Located(record: record, segment: segment.name, offset: offset))
                            }
                        }
                        scanFrom = index.covered
                    }
                }
            }
            // The part no index covers: a segment being written (or whose writer died before sealing it).
            guard let tail = Self.read(fd, from: scanFrom) else { continue }
            tail.withUnsafeBytes { bytes in
                let tail = LogSegment.records(in: bytes, from: 0, fingerprint: key.rawFingerprint)
                for (offset, record) in tail.records where key.matches(record) {
                    found.append(Located(record: record, segment: segment.name, offset: scanFrom + offset))
                }
            }
        }
        return found
    }

    /// The record a path names (`<segment path>#<offset>`), if it is there whole.
    func record(at path: String) -> LogRecord? {
        guard let hash = path.lastIndex(of: "#"), let offset = Int(path[path.index(after: hash)...]) else {
            return nil
        }
        let fd = open(String(path[..<hash]), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return Self.record(fd, at: offset)
    }

    /// How much the first `pread` of a record takes.
    static let firstRead = 256

    /// The record at `offset`, read with one `pread` (two for a long one).
    static func record(_ fd: Int32, at offset: Int) -> LogRecord? {
        var found: LogRecord?
        withRecord(fd, at: offset) { found = $0.record }
        return found
    }

    /// The record at `offset` of the segment open as `fd`, read in place and
    /// handed to `body`, if it is there whole.
    static func withRecord(_ fd: Int32, at offset: Int, _ body: (LogRecord.View) -> Void) {
        // An entry's record is about 200 bytes (FlowLogTests): one read of this many takes most whole, and a
        // survey weighing millions of records copies no more than it must.
        var buffer = [UInt8](repeating: 0, count: Self.firstRead)
        let n = SegmentIndex.readUpTo(fd, &buffer, at: offset)
        guard n >= LogRecord.headerSize else { return }
        let length = buffer.withUnsafeBytes { Int(LogRecord.load($0, 0, 4)) }
        if length + LogRecord.headerSize > n {
            guard length <= LogRecord.maxBodySize else { return }
            buffer = [UInt8](repeating: 0, count: length + LogRecord.headerSize)
            guard SegmentIndex.readFully(fd, &buffer, at: offset) else { return }
        } else {
            buffer.removeLast(buffer.count - n)
        }
        buffer.withUnsafeBytes { bytes in
            if case .record(let view, _) = LogRecord.decode(bytes, at: 0) { body(view) }
        }
    }

    /// The length of the file open as `fd` (0 when it cannot be told): what
    /// `fstat` of the open file says, never a listing's size, which another
    /// node's client may have cached.
    static func length(_ fd: Int32) -> Int {
        var info = stat()
        return fstat(fd, &info) == 0 ? Int(info.st_size) : 0
    }

    /// The bytes of `fd` from `offset` up to `end` (a length its caller
    /// took from `fstat` already), fewer where the file ends sooner.
    static func read(_ fd: Int32, from offset: Int, to end: Int) -> [UInt8]? {
        guard end > offset else { return [] }
        // Read straight into the array's storage: no zeroing, no second copy.
        return [UInt8](unsafeUninitializedCapacity: end - offset) { bytes, count in
            count = SegmentIndex.readUpTo(fd, UnsafeMutableRawBufferPointer(bytes), at: offset)
        }
    }

    /// The bytes of `fd` from `offset` to its end (empty at the end), nil
    /// when it cannot be read.
    static func read(_ fd: Int32, from offset: Int) -> [UInt8]? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        return read(fd, from: offset, to: Int(info.st_size))
    }

    /// The newest record of an entry's key whose flow reads back whole and
    /// matches its digest, with the flow's bytes: a record whose object is
    /// missing or damaged (a power cut between the two, a disk's error) is
    /// passed over for the older one, never served.
    func newestEntry(placement: String, fingerprint: String) -> (LogRecord, Data)? {
        for record in records(of: .entry(placement: placement, fingerprint: fingerprint)) {
            if let bytes = readObject(record.flowSHA256) { return (record, bytes) }
        }
        return nil
    }

    /// The placement's newest alias record.
    func newestAlias(placement: String) -> LogRecord? {
        records(of: .alias(placement: placement)).first
    }

    /// Every record of every segment, segment by segment (`cache info`,
    /// `list`, `verify`, compaction), with its offset and length and, from
    /// `survey`, whether a newer record of its key supersedes it (without
    /// one: every segment as listed now, none superseded); and each
    /// segment's problems: damage read past (it costs the records it hit,
    /// which a sealed segment's index counts), a tail no whole record
    /// follows (torn: what a writer killed mid-append leaves), or a sealed
    /// segment shorter than its index covers (cut short: what it lost), and
    /// an index that fails its check (lookups scan its segment instead).
    /// One segment's bytes are held at a time; each index is read once here,
    /// for its check and for what damage cost.
    func scan(
        _ survey: LogSurvey? = nil,
        _ body: (Segment, _ offset: Int, _ length: Int, LogRecord.View, _ superseded: Bool) -> Void
    ) -> [(path: String, message: String, torn: Bool)] {
        var problems: [(path: String, message: String, torn: Bool)] = []
        let parts = survey?.parts ?? segments().map { LogSurvey.Part(segment: $0, length: .max, superseded: []) }
        // One segment's bytes and one index's at a time, each in memory reused from segment to segment.
        let (segmentBytes, indexBytes) = (WholeFileBuffer(), WholeFileBuffer())
        var offsets: [Int] = []
        for part in parts {
            let segment = part.segment
            let fd = open(segment.path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            // The index's record offsets, when it checks out: what the damage cost.
            var indexed: (covered: Int, offsets: [Int])?
            if let index = segment.index {
                let indexFD = open(index, O_RDONLY | O_CLOEXEC)
                if indexFD >= 0 {
                    defer { close(indexFD) }
                    let covered = indexBytes.withBytes(of: indexFD) { SegmentIndex.entries(of: $0, offsets: &offsets) }
                    if let covered = covered ?? nil { indexed = (covered, offsets) }
                    if indexed == nil { problems.append((index, "index damaged (lookups scan its segment)", false)) }
                }
            }
            _ = segmentBytes.withBytes(of: fd) { whole in
                // No further than the survey saw: what a writer appended since was not weighed.
                let raw = UnsafeRawBufferPointer(rebasing: whole.prefix(part.length))
                guard LogSegment.hasMagic(raw) else {
                    // A segment whose header never reached the disk (a power cut right after it was made).
                    problems.append((segment.path, "not a segment (no header)", raw.allSatisfy { $0 == 0 }))
                    return
                }
                let read = LogSegment.walk(raw) { offset, record in
                    body(
                        segment, offset, LogRecord.headerSize + Int(LogRecord.load(raw, offset, 4)), record,
                        part.isSuperseded(offset))
                }
                func lost(_ range: Range<Int>) -> String {
                    guard let indexed else { return "" }
                    let count = indexed.offsets.count(where: range.contains)
                    return count == 1 ? ", 1 record lost" : ", \(count) records lost"
                }
                for (from, to, why) in read.skipped {
                    problems.append(
                        (
                            segment.path,
                            "\(why) at byte \(from): \(to - from) bytes dropped\(lost(from..<to)), read on from byte \(to)",
                            false
                        ))
                }
                if let indexed, indexed.covered > raw.count {
                    // Sealed, so its writer had written every byte the index covers: these are gone.
                    problems.append(
                        (
                            segment.path,
                            "cut short: its index covers \(indexed.covered) bytes, \(raw.count) remain\(lost(read.end..<indexed.covered))",
                            false
                        ))
                } else if let problem = read.problem, !part.live || !LogSegment.isTornTail(raw, at: read.end) {
                    // A live writer's tail (its append, seen in part through another node's cache) is
                    // no problem. A sealed segment's writer wrote every byte its index covers: what
                    // ends reading there is damage, not a kill. Past what it covers, it is what any tail is.
                    let covered = indexed.map { read.end < $0.covered } ?? false
                    problems.append((segment.path, problem, !covered && LogSegment.isTornTail(raw, at: read.end)))
                }
            }
        }
        return problems
    }

    // MARK: Objects

    func objectPath(_ sha256: String) -> String { "\(objectsDir)/\(sha256)" }

    /// A flow's bytes if they are there whole: their SHA-256 is their name.
    func readObject(_ sha256: String) -> Data? {
        guard let data = FileManager.default.contents(atPath: objectPath(sha256)),
            Digest.sha256Hex(data) == sha256
        else { return nil }
        return data
    }

    /// Which objects hold a flow a lookup serves, each object read once
    /// (`cache list`, `info`, `verify`, compaction): its bytes hash to its
    /// name (so they are what a writer stored, a flow it validated), and a
    /// record serves only if that flow's `id` is the record's flow id,
    /// compared by bytes. Holds one id an object, never one an entry.
    struct Servable {
        let log: FlowLog
        private var ids: [SHAKey: String?] = [:]
        private var last: (key: SHAKey, id: String?)?

        init(_ log: FlowLog) { self.log = log }

        /// Whether a lookup would serve `record`'s flow (what `LoggedEntries.lookup` checks).
        mutating func serves(_ record: LogRecord) -> Bool {
            guard let raw = LogRecord.rawHex(Substring(record.flowSHA256)) else { return false }
            return raw.withUnsafeBytes { sha in
                var id = record.flowID
                return id.withUTF8 { serves(sha: sha, flowID: UnsafeRawBufferPointer($0)) }
            }
        }

        /// `serves` of a record read in place.
        mutating func serves(_ view: LogRecord.View) -> Bool { serves(sha: view.flowSHA256, flowID: view.flowID) }

        mutating func serves(sha: UnsafeRawBufferPointer, flowID: UnsafeRawBufferPointer) -> Bool {
            guard sha.count == 32 else { return false }
            let key = SHAKey(sha)
            // Records of one flow come in runs: the last object asked about is compared before any hashing.
            if let last, last.key == key { return last.id.map { $0.sameBytes(as: flowID) } ?? false }
            if let known = ids[key] {
                last = (key, known)
                return known.map { $0.sameBytes(as: flowID) } ?? false
            }
            // Bounded, whatever the number of objects: one forgotten is read again.
            if ids.count >= 4096 { ids.removeAll(keepingCapacity: true) }
            let id = log.readObject(Digest.hex(sha)).flatMap { try? JSONValue.parse($0) }.flatMap {
                $0["id"]?.stringValue
            }
            ids[key] = id
            last = (key, id)
            return id.map { $0.sameBytes(as: flowID) } ?? false
        }

        /// A flow's SHA-256 as four words: what `ids` is keyed by.
        private struct SHAKey: Hashable {
            let words: (UInt64, UInt64, UInt64, UInt64)

            init(_ sha: UnsafeRawBufferPointer) {
                words = (
                    sha.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                    sha.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                    sha.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
                    sha.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
                )
            }

            static func == (a: SHAKey, b: SHAKey) -> Bool { a.words == b.words }

            func hash(into hasher: inout Hasher) {
                hasher.combine(words.0)
                hasher.combine(words.1)
                hasher.combine(words.2)
                hasher.combine(words.3)
            }
        }
    }

    /// Stores a flow's bytes under their SHA-256, unless they are there
    /// already (written by any writer: the same name is the same bytes).
    /// Published as every file is, synced before it has its name.
    ///
    /// A name another writer gave (found there, or taken between the look and
    /// the publish) may not be durable yet: its writer may still be syncing
    /// `objects/`. So before a record may name it, `objects/` is synced here
    /// too, once a process for each object it did not publish itself.
    ///
    /// `tenure`, the caller's shared hold of the cache's lock: an object known
    /// durable in the same tenure is taken as present with no `stat`, since
    /// no prune, compaction or clear can have run since (each holds the lock
    /// exclusively); in any other, it is looked at again.
    func storeObject(_ data: Data, sha256: String, tenure: UInt64? = nil) throws {
        if let tenure, durableObjects.read({ $0[sha256]?.tenure == tenure }) { return }
        let path = objectPath(sha256)
        var info = stat()
        if stat(path, &info) == 0 {
            if durableObjects.read({ $0[sha256]?.inode == UInt64(info.st_ino) }) {
                if let tenure { durableObjects.write { $0[sha256]?.tenure = tenure } }
                return
            }
            try AtomicFile.syncDirectory(objectsDir)
        } else {
            do {
                try AtomicFile.publish(data, directory: objectsDir, name: sha256, noReplace: true, faults: "object")
            } catch is AtomicFile.NameTaken {
                // Another writer's copy of the same bytes, perhaps not durable yet.
                try AtomicFile.syncDirectory(objectsDir)
            }
            guard stat(path, &info) == 0 else { return }
        }
        durableObjects.write { $0[sha256] = (UInt64(info.st_ino), tenure) }
    }

    // MARK: Writing

    /// One process's writing: its own segments, appended to in order. Every
    /// call is made holding the cache's shared lock (the caller's) and is
    /// serialized here.
    ///
    /// Group commit: records queued with `enqueue` by many callers are
    /// appended together, in one `pwrite`, and made durable by one
    /// `fdatasync` of the segment; each caller is then told. There is no
    /// timer: a commit starts as soon as the previous one ends, so a group
    /// is whatever was queued meanwhile.
    final class Writer: Sendable {
        let log: FlowLog
        let writerID: String
        private let state = Mutex<State>(State())
        private let queue = Mutex<Queue>(Queue())

        private struct State: ~Copyable {
            var segment: SegmentWriter?
            var sequence = 0
        }

        private struct Queue {
            var waiting: [(encoded: [UInt8], keys: [(prefix: UInt64, relativeOffset: Int)], done: Done)] = []
            var committing = false
        }

        typealias Done = @Sendable ((any Error)?) -> Void

        init(log: FlowLog, writerID: String = LogSegment.newWriterID()) {
            (self.log, self.writerID) = (log, writerID)
        }

        static func encode(_ records: [LogRecord]) -> ([UInt8], [(prefix: UInt64, relativeOffset: Int)]) {
            var encoded: [UInt8] = []
            encoded.reserveCapacity(records.count * 256)
            var keys: [(prefix: UInt64, relativeOffset: Int)] = []
            keys.reserveCapacity(records.count)
            for record in records {
                keys.append((record.key.prefix, encoded.count))
                record.encode(into: &encoded)
            }
            return (encoded, keys)
        }

        /// Appends `records` and makes them durable before returning; their
        /// objects must be stored already.
        func append(_ records: [LogRecord]) throws {
            guard !records.isEmpty else { return }
            let (encoded, keys) = Self.encode(records)
            try write(encoded, keys: keys)
        }

        /// Queues `records` for the next group commit; `done` is told once
        /// they are durable (nil) or could not be made so, on the committer's thread.
        func enqueue(_ records: [LogRecord], done: @escaping Done) {
            let (encoded, keys) = Self.encode(records)
            let start = queue.withLock { queue -> Bool in
                queue.waiting.append((encoded, keys, done))
                defer { queue.committing = true }
                return !queue.committing
            }
            if start { BlockingIO.submit { self.commitLoop() } }
        }

        private func commitLoop() {
            while true {
                let group = queue.withLock { queue in
                    defer { queue.waiting.removeAll(keepingCapacity: true) }
                    if queue.waiting.isEmpty { queue.committing = false }
                    return queue.waiting
                }
                if group.isEmpty { return }
                var encoded: [UInt8] = []
                var keys: [(prefix: UInt64, relativeOffset: Int)] = []
                for item in group {
                    keys += item.keys.map { ($0.prefix, $0.relativeOffset + encoded.count) }
                    encoded += item.encoded
                }
                var failure: (any Error)?
                do { try write(encoded, keys: keys) } catch { failure = error }
                for item in group { item.done(failure) }
            }
        }

        /// One append and one sync of the current segment; a segment that a
        /// compaction removed is followed by a new one, and one that is full
        /// is sealed after.
        private func write(_ encoded: [UInt8], keys: [(prefix: UInt64, relativeOffset: Int)]) throws {
            try state.withLock { state in
                let segment = try current(&state)
                do {
                    let start = segment.length
                    try segment.append(encoded, keys: keys)
                    FaultHook.reach("log-appended")
                    try segment.sync(directory: log.logDir)
                    FaultHook.reach("log-synced")
                    // This process's lookups learn the records' keys from here, not by reading them back.
                    log.view.appended(to: segment.name, from: start, through: segment.length, keys: keys)
                    if segment.isFull {
                        try segment.seal(directory: log.logDir)
                        state.segment = nil
                    }
                } catch {
                    // After a failed write or sync what the file holds is not known: the next
                    // records go to a new segment, never after bytes that may be torn.
                    state.segment = nil
                    throw error
                }
            }
        }

        private func current(_ state: inout State) throws -> SegmentWriter {
            if let segment = state.segment, segment.stillPublished { return segment }
            try AtomicFile.makeDirectory(log.logDir)
            state.sequence += 1
            let segment = try SegmentWriter(
                directory: log.logDir, name: "\(writerID)-\(state.sequence)\(LogSegment.suffix)")
            segment.rollBytes = log.rollBytes
            state.segment = segment
            return segment
        }

        /// Seals the segment being written (a writer's last act): readers then probe its index.
        func close() throws {
            try state.withLock { state in
                if let segment = state.segment, segment.stillPublished, segment.length > LogSegment.magic.count {
                    try segment.seal(directory: log.logDir)
                }
                state.segment = nil
            }
        }
    }

    // MARK: Compaction

    /// Why a compaction left a segment in place.
    static let liveReason = "a writer is still appending to it (it holds the segment's lock): run again once it is done"

    /// What a compaction kept and removed.
    public struct Compaction: Sendable {
        public var segmentsRead = 0
        public var recordsKept = 0
        public var recordsDropped = 0
        public var objectsRemoved = 0
        /// The objects removed, with their sizes.
        public var removedObjects: [(name: String, size: Int64)] = []
        /// Old segments that could not be removed (an immutable file, a
        /// read-only mount), with the reason: their records are still read.
        public var notRemoved: [(path: String, reason: String)] = []
    }

    /// Writes `records` into new segments of about the roll size each, each
    /// synced and sealed before this returns; their names.
    @discardableResult
    func writeSealed(_ records: [LogRecord]) throws -> Set<String> {
        try AtomicFile.makeDirectory(logDir)
        let writerID = LogSegment.newWriterID()
        var made: Set<String> = []
        var start = 0
        while start < records.count {
            let name = "\(writerID)-\(made.count + 1)\(LogSegment.suffix)"
            let segment = try SegmentWriter(directory: logDir, name: name)
            made.insert(segment.name)
            var encoded: [UInt8] = []
            var keys: [(prefix: UInt64, relativeOffset: Int)] = []
            while start < records.count && encoded.count < rollBytes {
                keys.append((records[start].key.prefix, encoded.count))
                records[start].encode(into: &encoded)
                start += 1
            }
            try segment.append(encoded, keys: keys)
            try segment.sync(directory: logDir)
            try segment.seal(directory: logDir)
        }
        return made
    }

    /// Copies every record of `segments` (the small ones: a short run's, a
    /// killed writer's) into new sealed segments and removes them, so that a
    /// lookup opens few files. Nothing is dropped. The caller holds the
    /// exclusive lock, so none of them is being appended to.
    func merge(_ segments: [Segment]) throws {
        var records: [LogRecord] = []
        // Another writer's segment it still appends to is left alone.
        let segments = segments.filter { $0.index != nil || !LogSegment.isLive($0.path) }
        for segment in segments {
            let fd = open(segment.path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            guard let bytes = Self.read(fd, from: 0) else { continue }
            bytes.withUnsafeBytes { raw in
                guard LogSegment.hasMagic(raw) else { return }
                records += LogSegment.records(in: raw).records.map(\.record)
            }
        }
        let made = try writeSealed(records.sorted { $1.isNewer(than: $0) })
        for segment in segments where !made.contains(segment.name) {
            if let index = segment.index { unlink(index) }
            unlink(segment.facts)
            unlink(segment.path)
        }
        try AtomicFile.syncDirectory(logDir)
    }

    /// Rewrites every segment into new, sealed ones holding, of each key,
    /// its survivor (`LogSurvey`: the record a lookup serves) if `keep`
    /// keeps it and, for an entry, its flow reads back whole (`Servable`);
    /// of each placement the surviving alias if `keep` keeps it and the entry
    /// it points at is kept; then removes the old segments and the objects no
    /// kept record points at. `keep` is given each record and its path
    /// (`<segment path>#<offset>`). The caller holds the exclusive lock.
    /// Streamed: records are written as the walk reads them, so memory does
    /// not grow with the log (the objects kept, one name each, are remembered).
    /// A kill at any step leaves every record it kept in some segment: the
    /// new segments are durable before any old one goes, and until then a
    /// reader finds each record twice, which is harmless.
    func compact(keeping keep: (LogRecord, String) -> Bool) throws -> Compaction {
        var result = Compaction()
        let survey = LogSurvey(self)
        let old = survey.parts.map(\.segment)
        var servable = Servable(self)
        var output = SealedOutput(log: self)
        var aliases: [LogRecord] = []
        var wanted = Set<String>()
        var failure: (any Error)?
        var read = 0
        let live = Set(survey.parts.filter(\.live).map(\.segment.path))
        var summary = SummaryBuilder()
        _ = scan(survey) { segment, offset, _, view, superseded in
            read += 1
            if live.contains(segment.path) {
                // Left in place, records and all, so their objects stay too.
                if view.kind == .entry { wanted.insert(Digest.hex(view.flowSHA256)) }
                return
            }
            guard failure == nil, !superseded else { return }
            let record = view.record
            guard keep(record, "\(segment.path)#\(offset)") else { return }
            switch record.kind {
            case .entry:
                guard servable.serves(record) else { return }
                wanted.insert(record.flowSHA256)
                do { try output.append(record) } catch { failure = error }
                summary.add(record)
            case .alias: aliases.append(record)
            }
        }
        let made: Set<String>
        do {
            if let failure { throw failure }
            // A placement's alias stays when the entry it points at was kept: that entry's survivor, kept.
            for alias in aliases {
                let key = LogKey.entry(placement: alias.placement, fingerprint: alias.fingerprint)
                if let target = try survivor(of: key, in: old, servable: &servable), keep(target.record, target.path),
                    servable.serves(target.record)
                {
                    try output.append(alias)
                    summary.aliases.append(alias.placement)
                }
            }
            made = try output.finish()
        } catch {
            // A compaction that could not finish (a full disk) leaves nothing of its own: the old
            // segments hold every record still, and the new ones would be copies a later one makes again.
            output.discard()
            throw FPError.cannotWrite(
                "\(logDir): the compaction could not write its new segments, so nothing was removed: \(error)")
        }
        result.segmentsRead = old.count
        (result.recordsKept, result.recordsDropped) = (output.written, read - output.written)
        FaultHook.reach("compact-written")
        for segment in old where !made.contains(segment.name) {
            if live.contains(segment.path) {
                result.notRemoved.append((segment.path, Self.liveReason))
                continue
            }
            if let index = segment.index { unlink(index) }
            unlink(segment.facts)
            if unlink(segment.path) != 0 && errno != ENOENT {
                result.notRemoved.append((segment.path, Errno.describe(errno)))
            }
        }
        // An index or facts file whose segment is gone (a removal killed between the two) goes too.
        let names = Set((DirectoryWalker.list(logDir, stat: false) ?? []).map(\.name))
        for name in names where !name.hasPrefix(".") {
            for suffix in [LogSegment.indexSuffix, SegmentFacts.suffix] where name.hasSuffix(LogSegment.suffix + suffix)
            {
                if !names.contains(String(name.dropLast(suffix.count))) { unlink("\(logDir)/\(name)") }
            }
        }
        try AtomicFile.syncDirectory(logDir)
        // What `info` reads while the log stays as it is now: only when it holds nothing but what was written here.
        if live.isEmpty && result.notRemoved.isEmpty && !summary.abandoned {
            LogSummary.write(self, placements: summary.placements, aliases: summary.aliases)
        } else {
            unlink("\(logDir)/\(LogSummary.fileName)")
        }
        // Objects no kept record points at; none while a writer is live: what it wrote last may be
        // a record this node does not see yet (another node's, through an attribute cache).
        guard live.isEmpty else { return result }
        for item in DirectoryWalker.list(objectsDir) ?? []
        where !item.name.hasPrefix(".") && !wanted.contains(item.name) {
            if unlink("\(objectsDir)/\(item.name)") == 0 {
                result.objectsRemoved += 1
                result.removedObjects.append((item.name, item.size))
            }
        }
        return result
    }

    /// What a compaction counts of the entries it writes, for `LogSummary`:
    /// in memory bounded whatever the cache holds, or nothing (`abandoned`)
    /// past `LogSummary.maxPlacements` placements or `maxTotalBuckets` buckets.
    struct SummaryBuilder {
        private var numbers: [ExactName: Int] = [:]
        private(set) var placements: [LogSummary.Placement] = []
        var aliases: [String] = []
        private var buckets = 0
        private(set) var abandoned = false

        mutating func add(_ record: LogRecord) {
            guard !abandoned else { return }
            let key = ExactName(record.placement)
            let number = numbers[key] ?? placements.count
            if number == placements.count {
                numbers[key] = number
                placements.append(LogSummary.Placement(placement: record.placement))
            }
            let before = placements[number].starts.count + placements[number].ends.count
            placements[number].add(
                resolvedAt: record.resolvedAtMillis, ttlSeconds: record.ttlSeconds, size: Int64(record.flowSize))
            buckets += placements[number].starts.count + placements[number].ends.count - before
            if placements.count > LogSummary.maxPlacements || buckets > LogSummary.maxTotalBuckets {
                (abandoned, placements, numbers, aliases) = (true, [], [:], [])
            }
        }
    }

    /// The record of `key` a lookup serves among `segments` (the newest
    /// whose flow reads back whole; the newest of all when none does), with
    /// its path: the survivor `LogSurvey` finds, for one key.
    func survivor(of key: LogKey, in segments: [Segment], servable: inout Servable) throws -> (
        record: LogRecord, path: String
    )? {
        let now = LogRecord.nowMillis
        var best: (record: LogRecord, path: String, serves: Bool)?
        for found in try records(of: key, in: segments) {
            let serves = found.record.kind == .alias || servable.serves(found.record)
            if let known = best, serves == known.serves ? !found.record.wins(over: known.record, now: now) : !serves {
                continue
            }
            best = (found.record, "\(logDir)/\(found.segment)#\(found.offset)", serves)
        }
        return best.map { ($0.record, $0.path) }
    }

    /// New sealed segments written as records come, each of about the roll
    /// size, synced and sealed as it fills (compaction, migration).
    struct SealedOutput {
        let log: FlowLog
        let writerID = LogSegment.newWriterID()
        var segment: SegmentWriter?
        var encoded: [UInt8] = []
        var keys: [(prefix: UInt64, relativeOffset: Int)] = []
        var made: Set<String> = []
        var written = 0

        init(log: FlowLog) { self.log = log }

        mutating func append(_ record: LogRecord) throws {
            keys.append((record.key.prefix, encoded.count))
            record.encode(into: &encoded)
            written += 1
            if encoded.count >= 256 << 10 { try flush() }
        }

        private mutating func flush() throws {
            guard !encoded.isEmpty else { return }
            if segment == nil {
                try AtomicFile.makeDirectory(log.logDir)
                let made = try SegmentWriter(
                    directory: log.logDir, name: "\(writerID)-\(self.made.count + 1)\(LogSegment.suffix)")
                self.made.insert(made.name)
                segment = made
            }
            guard let segment else { return }
            try segment.append(encoded, keys: keys)
            encoded.removeAll(keepingCapacity: true)
            keys.removeAll(keepingCapacity: true)
            if segment.length >= log.rollBytes { try seal() }
        }

        private mutating func seal() throws {
            guard let segment else { return }
            try segment.sync(directory: log.logDir)
            try segment.seal(directory: log.logDir)
            self.segment = nil
        }

        /// Removes every segment (and index) made, after a failure.
        mutating func discard() {
            segment = nil
            for name in made {
                unlink("\(log.logDir)/\(name)\(LogSegment.indexSuffix)")
                unlink("\(log.logDir)/\(name)\(SegmentFacts.suffix)")
                unlink("\(log.logDir)/\(name)")
            }
            try? AtomicFile.syncDirectory(log.logDir)
            made = []
        }

        /// The last segment flushed, synced and sealed; the names made.
        mutating func finish() throws -> Set<String> {
            try flush()
            try seal()
            return made
        }
    }
}
