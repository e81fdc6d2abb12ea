import Foundation
import Testing

@testable import FlowPilotCore

#if canImport(Glibc)
    import Glibc

    private let systemUmask = Glibc.umask
#elseif canImport(Darwin)
    import Darwin

    private let systemUmask = Darwin.umask
#endif

private func flow(_ id: String, version: String) -> FlowDocument {
    let json: JSONValue = .object([
        "schema_version": .number(1), "id": .string(id), "version": .string(version),
        "screens": .array([.object(["id": .string("s"), "components": .array([])])]),
    ])
    return FlowDocument.validate(json, location: "test").0!
}

/// The rules of docs/cache-format.md, "Many writers" and "Time", with the
/// interleavings forced in one process: each test orders the writes itself.
@Suite("a cache many writers share", .serialized)
final class SharedCacheTests {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fpshared-\(UUID().uuidString)").path
    deinit { try? FileManager.default.removeItem(atPath: scratch) }
    private func tempDir() -> String { "\(scratch)/\(UUID().uuidString)" }
    let user = Identity(userID: "u")

    @Test(
        "shared holds of the cache's lock in one process share one descriptor, and the lock stays held until the last"
    )
    func sharedHoldsShareOneDescriptor() throws {
        let store = try CacheStore(root: tempDir(), create: true)
        // This process's descriptors open on this cache's lock file (other tests' come and go meanwhile).
        func descriptors() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == store.lockPath
            }.count
        }
        let before = try descriptors()
        let first = try CacheStore.Lock(path: store.lockPath, exclusive: false)
        let second = try CacheStore.Lock(path: store.lockPath, exclusive: false)
        let third = try CacheStore.Lock(path: store.lockPath, exclusive: false)
        #expect(try descriptors() == before + 1, "three holds, one descriptor")
        #expect(CacheStore.Lock.sharedHoldCount(store.lockPath) == 3)
        // Another descriptor (as another process's prune) cannot take it exclusively while any hold is left.
        func exclusiveTaken() -> Bool {
            let other = open(store.lockPath, O_RDONLY | O_CLOEXEC)
            defer { close(other) }
            return flock(other, LOCK_EX | LOCK_NB) == 0
        }
        first.release()
        second.release()
        #expect(!exclusiveTaken(), "held while one hold is left")
        third.release()
        #expect(CacheStore.Lock.sharedHoldCount(store.lockPath) == 0)
        #expect(try descriptors() == before, "the last release closes it")
        #expect(exclusiveTaken(), "free once every hold is released")
        // An exclusive lock is its own descriptor, as before.
        let exclusive = try CacheStore.Lock(path: store.lockPath, exclusive: true, checked: false)
        #expect(CacheStore.Lock.sharedHoldCount(store.lockPath) == 0)
        exclusive.release()
    }

    @Test(
        "an object known durable is taken as present only in the shared lock's tenure it was seen in: one removed between two is stored again"
    )
    func objectsKnownWithinATenure() throws {
        let store = try CacheStore(root: tempDir(), create: true, newFormat: 2)
        let bytes = Data(#"{"id":"f","schema_version":1,"screens":[],"version":"1"}"#.utf8)
        let sha = Digest.sha256Hex(bytes)
        let path = store.log.objectPath(sha)
        let first = try CacheStore.Lock(path: store.lockPath, exclusive: false)
        let joined = try CacheStore.Lock(path: store.lockPath, exclusive: false)
        #expect(first.tenure != nil && first.tenure == joined.tenure, "holds sharing a descriptor share its tenure")
        try store.log.storeObject(bytes, sha256: sha, tenure: first.tenure)
        try store.log.storeObject(bytes, sha256: sha, tenure: joined.tenure)
        #expect(FileManager.default.fileExists(atPath: path))
        first.release()
        joined.release()
        // Between two tenures a prune or clear (another process's, holding the lock exclusively) may remove it.
        try store.withLock(exclusive: true) { #expect(unlink(path) == 0) }
        let next = try CacheStore.Lock(path: store.lockPath, exclusive: false)
        #expect(next.tenure != nil && next.tenure != first.tenure, "a new descriptor, a new tenure")
        try store.log.storeObject(bytes, sha256: sha, tenure: next.tenure)
        #expect(FileManager.default.contents(atPath: path) == bytes, "looked at again in a new tenure, stored again")
        next.release()
        // Exclusive holds have none: nothing is taken as present under them.
        let exclusive = try CacheStore.Lock(path: store.lockPath, exclusive: true, checked: false)
        #expect(exclusive.tenure == nil)
        exclusive.release()
    }

    @Test("a writer that finishes after a newer entry of its key leaves the newer one: the later entry wins")
    func laterEntryWins() throws {
        let store = try CacheStore(root: tempDir(), create: true, newFormat: 1)
        let now = Date()
        for round in 0..<20 {
            let newer = now + Double(round) * 10
            // The newer writer finishes first; the older one's cleanup runs after it.
            try store.storeFlow(
                placement: "p", identity: user, document: flow("f", version: "new\(round)"), ttlSeconds: 300,
                tier: .network, resolvedAt: newer)
            try store.storeFlow(
                placement: "p", identity: user, document: flow("f", version: "old\(round)"), ttlSeconds: 300,
                tier: .network, resolvedAt: newer - 5)
            let found = try #require(store.lookupFlow(placement: "p", identity: user), "round \(round): key left empty")
            #expect(found.1.version == "new\(round)")
            let alias = try #require(store.lookupAlias(placement: "p"), "round \(round): alias dangling")
            #expect(alias.1.version == "new\(round)")
        }
        // Each later write removed the older files: the key holds the last round's two.
        let key = try #require(store.lookupFlow(placement: "p", identity: user)).0
        let files = try FileManager.default.contentsOfDirectory(atPath: PathName.parent(of: key.path))
        #expect(files.count == 2)
    }

    @Test("the same with group commits: two writers staged together, the older committed last")
    func laterEntryWinsGrouped() async throws {
        let store = try CacheStore(root: tempDir(), create: true)
        let now = Date()
        _ = try await store.storeFlow(
            placement: "p", identity: user, document: flow("f", version: "newer"), ttlSeconds: 300, tier: .network,
            resolvedAt: now, commit: .shared)
        _ = try await store.storeFlow(
            placement: "p", identity: user, document: flow("f", version: "older"), ttlSeconds: 300, tier: .network,
            resolvedAt: now - 1, commit: .shared)
        #expect(store.lookupFlow(placement: "p", identity: user)?.1.version == "newer")
    }

    @Test("an entry from a writer whose clock ran ahead is stale, and the next write replaces it")
    func futureEntry() throws {
        let store = try CacheStore(root: tempDir(), create: true, newFormat: 1)
        let now = Date()
        let yearAhead = now + 365 * 86400
        try store.storeFlow(
            placement: "p", identity: user, document: flow("f", version: "future"), ttlSeconds: 300, tier: .network,
            resolvedAt: yearAhead)
        let (future, _) = try #require(store.lookupFlow(placement: "p", identity: user))
        #expect(!future.isFresh(at: now), "an entry a year ahead must not be fresh")
        #expect(future.isFromFuture(at: now))
        // Within the documented skew it is fresh: clocks a few seconds apart are normal.
        let skewed = CachedFlow(
            placement: "p", fingerprint: future.fingerprint, userID: "u", flowID: "f", version: "v",
            resolvedAt: now + CachedFlow.clockSkew - 1, ttlSeconds: 300, size: 0, path: "")
        #expect(skewed.isFresh(at: now) && !skewed.isFromFuture(at: now))
        // It counts as resolved now (docs/cache-format.md, "Time"): with a TTL of 0 it is stale at once.
        let noTTL = CachedFlow(
            placement: "p", fingerprint: future.fingerprint, userID: "u", flowID: "f", version: "v",
            resolvedAt: now + 30, ttlSeconds: 0, size: 0, path: "")
        #expect(!noTTL.isFresh(at: now) && !noTTL.isFromFuture(at: now))
        let verification = try store.verify(repair: false, now: now)
        #expect(verification.findings.map(\.rule).contains("cache-future-entry"))
        try store.storeFlow(
            placement: "p", identity: user, document: flow("f", version: "now"), ttlSeconds: 300, tier: .network,
            resolvedAt: now)
        let (current, doc) = try #require(store.lookupFlow(placement: "p", identity: user))
        #expect(doc.version == "now" && current.isFresh(at: now))
        let pruned = try store.prune(
            {
                var o = CacheStore.PruneOptions()
                o.olderThan = 3600
                o.now = now
                return o
            }())
        #expect(try pruned.removed.array().filter { $0.kind == .flow }.isEmpty)
    }

    @Test("a process that finds the new directory without its marker, while another initializes it, opens it")
    func initializationRace() throws {
        let root = tempDir()
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // Between this process's look for the marker and its listing, another
        // initializes the cache and writes into it.
        CacheStore.initializationHook = { [user] in
            CacheStore.initializationHook = nil
            let other = try? CacheStore(root: root, create: true)
            _ = try? other?.storeFlow(
                placement: "p", identity: user, document: flow("f", version: "v"), ttlSeconds: 300, tier: .network)
        }
        defer { CacheStore.initializationHook = nil }
        let store = try CacheStore(root: root, create: true)
        #expect(store.lookupFlow(placement: "p", identity: user) != nil)
        // A directory with something else in it and no marker is still refused.
        let foreign = tempDir()
        try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: "\(foreign)/notes.txt", contents: Data("x".utf8)))
        #expect(throws: FPError.self) { try CacheStore(root: foreign, create: true) }
    }

    @Test("files and directories follow the umask: group-writable under 002", arguments: [1, 2])
    func umask(format: Int) throws {
        let root = tempDir()
        let old = Platform.creationMask
        let m = systemUmask(0o022)
        _ = systemUmask(m)
        #expect(old == m)
        let store = try CacheStore(root: root, create: true, newFormat: format)
        let entry = try store.storeFlow(
            placement: "p", identity: user, document: flow("f", version: "v"), ttlSeconds: 300, tier: .network)
        // Format 1: the entry's file and key directory; format 2: its segment and log/, and its flow's object.
        var files = [entry.path]
        if format == 2 {
            files = [
                try #require(store.log.segments().first).path, "\(root)/objects/\(try #require(entry.flowSHA256))",
            ]
        }
        var info = stat()
        for file in files {
            #expect(stat(file, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o666 & ~old, "\(file)")
            #expect(stat(PathName.parent(of: file), &info) == 0)
            #expect(info.st_mode & 0o777 == 0o777 & ~old, "\(PathName.parent(of: file))")
        }
        #expect(stat("\(root)/.lock", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o666 & ~old)
    }

    @Test("Retry-After: seconds, HTTP-dates in their three forms, and hostile values ignored or clamped")
    func retryAfter() {
        let now = Date(timeIntervalSince1970: 784_111_770)  // Sun, 06 Nov 1994 08:49:30 GMT
        #expect(RetryAfter.seconds("3", now: now) == 3)
        #expect(RetryAfter.seconds("120", now: now) == RetryAfter.limit)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == 7)
        #expect(RetryAfter.seconds("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == 7)
        #expect(RetryAfter.seconds("Sun Nov  6 08:49:37 1994", now: now) == 7)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:00:00 GMT", now: now) == 0)
        for hostile in ["-1", "-1e300", "-inf", "inf", "nan", "1e400", "", "soon", "0x10"] {
            #expect(RetryAfter.seconds(hostile, now: now) == nil, "\(hostile)")
        }
    }

    @Test("a TTL of the wrong type is invalid, never the default")
    func strictTTL() throws {
        #expect(try TTL.read(nil, field: "t").get() == nil)
        #expect(try TTL.read(.null, field: "t").get() == nil)
        #expect(try TTL.read(.number(86400), field: "t").get() == 86400)
        for bad: JSONValue in [.string("86400"), .bool(true), .number(-1), .number(1e10), .array([])] {
            guard case .failure(let problem) = TTL.read(bad, field: "t") else {
                Issue.record("\(bad) taken as a TTL")
                continue
            }
            #expect(problem.message.hasPrefix("t "))
        }
    }
}
