import Foundation
import Synchronization
import Testing

@testable import FlowPilotCore

/// The cache's promises (docs/cache-format.md) kept by a format-2 store:
/// tiers and aliases, clearing by identity, pruning by age, corrupt data a
/// miss and a finding that `--repair` removes, writers beside a compaction,
/// and what an entry costs.
@Suite("format-2 cache store")
final class Format2StoreTests {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fmt2-\(UUID().uuidString)").path

    deinit { try? FileManager.default.removeItem(atPath: scratch) }

    func store() throws -> CacheStore {
        try CacheStore(root: "\(scratch)/\(UUID().uuidString)", create: true, newFormat: 2)
    }

    static func flow(_ id: String, version: String = "v1") -> FlowDocument {
        let json: JSONValue = .object([
            "schema_version": .number(1), "id": .string(id), "version": .string(version),
            "screens": .array([.object(["id": .string("s"), "components": .array([])])]),
        ])
        return FlowDocument.validate(json, location: "test").0!
    }

    let alice = Identity(userID: "alice", attributes: ["plan": .string("free")])
    let bob = Identity(userID: "bob")

    @Test(
        "the format is asked in one place: a store opened as format 1 writes files until the cache is migrated, then the log, and finds what it wrote before in the log"
    )
    func oneInterfaceTwoFormats() throws {
        let root = "\(scratch)/\(UUID().uuidString)"
        let store = try CacheStore(root: root, create: true, newFormat: 1)
        #expect(store.readEntries is FileEntries && store.writeEntries is FileEntries)
        let before = try store.storeFlow(
            placement: "paywall", identity: alice, document: Self.flow("a"), ttlSeconds: 300, tier: .network)
        #expect(!before.inLog && FileManager.default.fileExists(atPath: before.path), "format 1: a file an entry")
        _ = try store.migrate()
        #expect(store.readEntries is FileEntries, "opened as format 1, it reads its files first")
        #expect(store.writeEntries is LoggedEntries, "migrated since it was opened: it writes the log")
        #expect(!FileManager.default.fileExists(atPath: before.path), "the migration removed format 1's tree")
        #expect(store.lookupFlow(placement: "paywall", identity: alice)?.1.id == "a", "found in the log")
        #expect(store.lookupAlias(placement: "paywall")?.1.id == "a")
        let after = try store.storeFlow(
            placement: "paywall", identity: bob, document: Self.flow("b"), ttlSeconds: 300, tier: .network,
            resolvedAt: Date() + 1)
        #expect(after.inLog && !FileManager.default.fileExists(atPath: "\(root)/flows"), "written as a record")
        let reopened = try CacheStore(root: root)
        #expect(reopened.readEntries is LoggedEntries && reopened.writeEntries is LoggedEntries)
        #expect(reopened.lookupFlow(placement: "paywall", identity: bob)?.1.id == "b")
        #expect(reopened.lookupAlias(placement: "paywall")?.1.id == "b", "the newest alias, written after the switch")
    }

    @Test(
        "verify and prune ask each format the same of its entries: a corrupt entry and the alias on it found, one identity pruned with its alias, nothing left to find",
        arguments: [1, 2])
    func maintenanceOneInterface(format: Int) throws {
        let store = try CacheStore(root: "\(scratch)/\(UUID().uuidString)", create: true, newFormat: format)
        let now = Date()
        try store.storeFlow(
            placement: "paywall", identity: alice, document: Self.flow("a"), ttlSeconds: 300, tier: .network,
            resolvedAt: now)
        try store.storeFlow(
            placement: "onboarding", identity: alice, document: Self.flow("o"), ttlSeconds: 300, tier: .network,
            resolvedAt: now)
        let bobs = try store.storeFlow(
            placement: "paywall", identity: bob, document: Self.flow("b"), ttlSeconds: 300, tier: .network,
            resolvedAt: now + 1)
        store.finishWriting()
        var scan = store.scan()
        scan.walk { _ in }  // format 2's aliases are known once the log is walked
        let entries = store.entries(of: scan)
        #expect(format == 1 ? entries is FileEntries : entries is LoggedEntries)
        let alias = try #require(scan.aliases.first { $0.placement == "paywall" })
        let target = try #require(entries.target(of: alias), "the alias's key looked up alone")
        #expect(
            target.userID.sameBytes(as: "bob") && entries.isUser("bob", of: target)
                && !entries.isUser("alice", of: target))
        #expect(entries.problem(of: target) == nil && entries.document(of: target)?.id == "b")

        // Bob's flow damaged: in its file (format 1) or its object (format 2).
        let damaged = format == 1 ? bobs.path : store.log.objectPath(try #require(bobs.flowSHA256))
        try Data("{ not a flow".utf8).write(to: URL(fileURLWithPath: damaged))
        // Looked at again as a command does, by a store of its own (format 2 keeps the flows it read, by digest).
        let checker = try CacheStore(root: store.root)
        let checked = checker.entries(of: scan)
        #expect(checked.problem(of: target) != nil && checked.document(of: target) == nil)
        let found = try checker.verify(repair: false, now: now + 2).findings
        #expect(found.contains { $0.rule == "cache-corrupt-entry" })
        #expect(found.contains { $0.rule == "cache-dangling-alias" && store.relative(alias.path) == $0.path })
        #expect(!found.contains { $0.path.contains("alice") }, "alice's entries read whole: \(found)")

        var options = CacheStore.PruneOptions()
        options.userID = "bob"
        options.now = now + 2
        let pruned = try checker.prune(options)
        var removed: [Removal] = []
        try pruned.removed.each { removed.append($0) }
        #expect(pruned.failed.count == 0)
        #expect(removed.filter { $0.kind == .flow }.count == 1, "bob's one entry: \(removed.map(\.path))")
        #expect(removed.contains { $0.kind == .alias }, "the alias on it goes with it")
        let after = try CacheStore(root: store.root)
        #expect(try after.verify(repair: false, now: now + 2).findings.isEmpty, "nothing left to find")
        #expect(after.lookupFlow(placement: "paywall", identity: alice)?.1.id == "a")
        #expect(after.lookupFlow(placement: "onboarding", identity: alice)?.1.id == "o")
        #expect(after.lookupFlow(placement: "paywall", identity: bob) == nil)
        // `info` at rest: format 2's summary, which the prune's compaction wrote, counts what a walk counts;
        // format 1 keeps none.
        let resting = after.readEntries.restingCounts(at: now + 2)
        if format == 1 {
            #expect(resting == nil)
        } else {
            #expect(resting?.counts.map(\.entries).reduce(0, +) == 2, "alice's two entries")
            #expect(after.restingSummary(at: now + 2)?.flows == after.walkedSummary(at: now + 2).flows)
        }
    }

    @Test(
        "an identity's placements looked up together find what each lookup alone finds: the newest whole entry, or a miss"
    )
    func lookupsTogether() throws {
        let store = try store()
        try store.storeFlow(
            placement: "paywall", identity: alice, document: Self.flow("old"), ttlSeconds: 300, tier: .network)
        try store.storeFlow(
            placement: "paywall", identity: alice, document: Self.flow("new"), ttlSeconds: 300, tier: .network,
            resolvedAt: Date() + 1)
        try store.storeFlow(
            placement: "onboarding", identity: alice, document: Self.flow("onb"), ttlSeconds: 300, tier: .network)
        try store.storeFlow(
            placement: "settings", identity: bob, document: Self.flow("bob's"), ttlSeconds: 300, tier: .network)
        store.finishWriting()  // sealed: found through the index
        try store.storeFlow(
            placement: "settings", identity: alice, document: Self.flow("set"), ttlSeconds: 300, tier: .network)
        let placements = ["paywall", "missing", "onboarding", "settings"]
        let together = store.lookupFlows(placements, identity: alice).map { $0?.1.id }
        let alone = placements.map { store.lookupFlow(placement: $0, identity: alice)?.1.id }
        #expect(together == ["new", nil, "onb", "set"])
        #expect(together == alone)
        #expect(store.lookupFlows(["settings"], identity: bob).map { $0?.1.id } == ["bob's"])
    }

    @Test("an entry is found by its identity only; the alias serves the placement's newest after an identity change")
    func tiersAndAlias() throws {
        let store = try store()
        #expect(store.version == 2)
        try store.storeFlow(
            placement: "paywall", identity: alice, document: Self.flow("a"), ttlSeconds: 300, tier: .network)
        try store.storeFlow(
            placement: "paywall", identity: bob, document: Self.flow("b"), ttlSeconds: 300, tier: .network,
            resolvedAt: Date() + 1)
        #expect(store.lookupFlow(placement: "paywall", identity: alice)?.1.id == "a")
        #expect(store.lookupFlow(placement: "paywall", identity: Identity(userID: "alice")) == nil, "other attributes")
        #expect(store.lookupFlow(placement: "onboarding", identity: alice) == nil)
        #expect(store.lookupAlias(placement: "paywall")?.1.id == "b", "the newest resolve for any identity")
        let entries = try FileManager.default.contentsOfDirectory(atPath: store.root).sorted()
        #expect(entries == [".lock", "fpcache.json", "log", "objects"])
    }

    @Test("the later write of a key wins, whichever writer makes it, and a reader sees it at once")
    func laterWriteWins() throws {
        let first = try store()
        let second = try CacheStore(root: first.root)
        let now = Date()
        try first.storeFlow(
            placement: "p", identity: alice, document: Self.flow("x", version: "old"), ttlSeconds: 300, tier: .network,
            resolvedAt: now)
        #expect(second.lookupFlow(placement: "p", identity: alice)?.1.version == "old")
        try second.storeFlow(
            placement: "p", identity: alice, document: Self.flow("x", version: "new"), ttlSeconds: 300, tier: .network,
            resolvedAt: now + 0.5)
        try first.storeFlow(
            placement: "p", identity: alice, document: Self.flow("x", version: "late-but-older"), ttlSeconds: 300,
            tier: .network, resolvedAt: now + 0.2)
        for reader in [first, second, try CacheStore(root: first.root)] {
            #expect(reader.lookupFlow(placement: "p", identity: alice)?.1.version == "new")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: first.root + "/log").count == 2, "a segment each")
    }

    @Test("an alias written with an entry long ago stays when --older-than keeps the entry its key now serves")
    func aliasOfARefreshedKey() throws {
        let store = try store()
        try store.storeFlow(
            placement: "p", identity: alice, document: Self.flow("a", version: "old"), ttlSeconds: 60,
            tier: .network, resolvedAt: Date() - 7200)
        // The key resolved again since, its alias left as it was (a writer that points aliases when it finishes).
        try store.storeFlow(
            placement: "p", identity: alice, document: Self.flow("a", version: "new"), ttlSeconds: 60,
            tier: .network, pointAlias: false)
        store.finishWriting()
        var options = CacheStore.PruneOptions()
        options.olderThan = 3600
        let planned = try CacheStore(root: store.root).prune(
            {
                var dry = options
                dry.dryRun = true
                return dry
            }())
        #expect(try !planned.removed.array().contains { $0.kind == .alias }, "the dry run keeps the alias")
        _ = try CacheStore(root: store.root).prune(options)
        let after = try CacheStore(root: store.root)
        #expect(after.lookupAlias(placement: "p")?.1.version == "new", "and so does the prune")
    }

    @Test("prune --user-id leaves no trace of that identity, and its alias goes with it; --older-than by age")
    func pruneIdentityAndAge() throws {
        let store = try store()
        let old = Date() - 7200
        try store.storeFlow(
            placement: "p", identity: bob, document: Self.flow("b"), ttlSeconds: 60, tier: .network, resolvedAt: old)
        try store.storeFlow(placement: "p", identity: alice, document: Self.flow("a"), ttlSeconds: 60, tier: .network)
        #expect(store.lookupAlias(placement: "p")?.0.userID == "alice")
        var options = CacheStore.PruneOptions()
        options.userID = "alice"
        // A flow row's bytes are its record's, what the compaction frees: the flow is an object of its own.
        options.dryRun = true
        let planned = try #require(try store.prune(options).removed.array().first { $0.kind == .flow })
        let parts = planned.path.split(separator: "#")
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: "\(store.root)/\(parts[0])")))
        let at = try #require(Int(parts[1]))
        let length = bytes.withUnsafeBytes { raw -> Int? in
            if case .record(_, let next) = LogRecord.decode(raw, at: at) { return next - at }
            return nil
        }
        #expect(planned.bytes == length.map(Int64.init), "a record's bytes, not its flow's")
        options.dryRun = false
        let removed = try store.prune(options)
        let flows = try removed.removed.array().filter { $0.kind == .flow }
        #expect(flows.count == 1 && flows.first?.bytes == planned.bytes)
        #expect(try removed.removed.array().contains { $0.kind == .alias })
        let after = try CacheStore(root: store.root)
        #expect(after.lookupFlow(placement: "p", identity: alice) == nil)
        #expect(after.lookupAlias(placement: "p") == nil, "the alias pointed at alice")
        #expect(after.lookupFlow(placement: "p", identity: bob)?.1.id == "b")
        #expect(!after.scan().flows.contains { $0.userID == "alice" })
        options = CacheStore.PruneOptions()
        options.olderThan = 3600
        _ = try after.prune(options)
        #expect(try CacheStore(root: store.root).scan().flows.isEmpty)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: store.root + "/objects").isEmpty,
            "flows no entry points at go with the compaction")
    }

    @Test("prune with --user-id and --older-than removes each entry either selects, from the future too, and no other")
    func pruneBothRules() throws {
        let store = try store()
        let now = Date()
        // Ages: two hours, a minute, 30 s ahead (within the clock skew: age 0), five minutes ahead (the future).
        let times = [now - 7200, now - 60, now + 30, now + 300]
        for (n, user) in ["ann", "bob", "cat"].enumerated() {
            for (t, at) in times.enumerated() {
                try store.storeFlow(
                    placement: "p\(t)", identity: Identity(userID: user), document: Self.flow("f\(n)"),
                    ttlSeconds: 600, tier: .network, resolvedAt: at, pointAlias: false)
            }
        }
        store.finishWriting()
        var options = CacheStore.PruneOptions()
        (options.userID, options.olderThan, options.dryRun, options.now) = ("bob", 3600, true, now)
        let selected = try CacheStore(root: store.root).prune(options).removed.array().filter { $0.kind == .flow }
        // The rule as fpctl-cache-prune(1) states it, applied to each listed entry.
        let expected = try CacheStore(root: store.root).scan().flows.filter {
            $0.userID == "bob" || $0.isFromFuture(at: now) || $0.age(at: now) > 3600
        }
        #expect(expected.count == 3 * 2 + 4 - 2, "ann's and cat's old and future entries, and all of bob's")
        #expect(Set(selected.map(\.path)) == Set(expected.map { store.relative($0.path) }))
    }

    @Test("a damaged flow or a torn record is a miss and a finding; --repair removes exactly those")
    func corruptionIsAMissAndAFinding() throws {
        let store = try store()
        try store.storeFlow(placement: "p", identity: alice, document: Self.flow("a"), ttlSeconds: 300, tier: .network)
        try store.storeFlow(placement: "q", identity: bob, document: Self.flow("g"), ttlSeconds: 300, tier: .network)
        let object = try #require(store.scan().flows.first { $0.userID == "alice" }?.flowSHA256)
        try Data("{\"garbage\":".utf8).write(to: URL(fileURLWithPath: "\(store.root)/objects/\(object)"))
        let segment = try #require(store.log.segments().first)
        let handle = try #require(FileHandle(forWritingAtPath: segment.path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([200, 0, 0, 0, 9, 9]))
        try handle.close()
        let reader = try CacheStore(root: store.root)
        #expect(reader.lookupFlow(placement: "p", identity: alice) == nil, "never served")
        #expect(reader.lookupFlow(placement: "q", identity: bob)?.1.id == "g")
        let found = try reader.verify(repair: false)
        let rules = Set(found.findings.map(\.rule))
        // The alias pointed at the damaged entry: dangling, as in format 1. The torn tail is a killed
        // writer's debris.
        #expect(
            rules == ["cache-corrupt-entry", "cache-temp-debris", "cache-dangling-alias"],
            "\(found.findings.map(\.line))")
        let repaired = try reader.verify(repair: true)
        #expect(repaired.notRemoved.isEmpty)
        let clean = try CacheStore(root: store.root)
        #expect(try clean.verify(repair: false).findings.isEmpty)
        #expect(clean.lookupFlow(placement: "q", identity: bob)?.1.id == "g", "repair removed only what was broken")
        // A flipped byte inside a record is damage, not debris; it costs that record (the entry), and
        // reading goes on after it: the alias written with it reads whole, and points at nothing.
        let before = Set(clean.log.segments().map(\.name))
        try clean.storeFlow(placement: "r", identity: alice, document: Self.flow("r"), ttlSeconds: 300, tier: .network)
        let segment2 = try #require(clean.log.segments().first { !before.contains($0.name) })
        var bytes = try Data(contentsOf: URL(fileURLWithPath: segment2.path))
        bytes[LogSegment.magic.count + 20] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: segment2.path))
        let damaged = try CacheStore(root: store.root).verify(repair: false)
        #expect(damaged.findings.map(\.rule) == ["cache-dangling-alias", "cache-corrupt-segment"])
    }

    @Test("a writer whose segment a compaction replaced goes on in a new one; nothing it wrote is lost")
    func writerBesideCompaction() throws {
        let writer = try store()
        let pruner = try CacheStore(root: writer.root)
        let users = (0..<50).map { Identity(userID: "u\($0)") }
        for user in users[..<25] {
            try writer.storeFlow(
                placement: "p", identity: user, document: Self.flow("f"), ttlSeconds: 300, tier: .network)
        }
        let before = Set(writer.log.segments().map(\.name))
        // A lookup lists the segments now, then the compaction replaces every one of them.
        #expect(writer.lookupFlow(placement: "p", identity: users[0]) != nil)
        _ = try pruner.prune(CacheStore.PruneOptions())
        #expect(Set(writer.log.segments().map(\.name)).isDisjoint(with: before))
        for user in users[25...] {
            try writer.storeFlow(
                placement: "p", identity: user, document: Self.flow("f"), ttlSeconds: 300, tier: .network)
        }
        for user in users {
            #expect(writer.lookupFlow(placement: "p", identity: user) != nil, "\(user.userID)")
            #expect(try CacheStore(root: writer.root).lookupFlow(placement: "p", identity: user) != nil)
        }
    }

    @Test("a writer whose flow a prune removed between two of its writes stores it again")
    func flowRemovedBetweenWrites() throws {
        let writer = try store()
        try writer.storeFlow(placement: "p", identity: alice, document: Self.flow("f"), ttlSeconds: 300, tier: .network)
        var options = CacheStore.PruneOptions()
        options.userID = "alice"
        _ = try CacheStore(root: writer.root).prune(options)
        #expect(try FileManager.default.contentsOfDirectory(atPath: writer.root + "/objects").isEmpty)
        try writer.storeFlow(placement: "p", identity: bob, document: Self.flow("f"), ttlSeconds: 300, tier: .network)
        #expect(try CacheStore(root: writer.root).lookupFlow(placement: "p", identity: bob)?.1.id == "f")
        #expect(try CacheStore(root: writer.root).verify(repair: false).findings.isEmpty)
    }

    @Test("10,000 entries of one flow cost their records, not a file each")
    func entriesCostTheirBytes() async throws {
        let store = try store()
        let document = Self.flow("paywall")
        let stages = (0..<5000).map { Identity(userID: "user-\($0)") }
        for identity in stages {
            let stored = await store.storeFlows(
                [("paywall", document, 300), ("onboarding", document, 300)], identity: identity, tier: .network,
                commit: .shared)
            for result in stored { _ = try result.get() }
        }
        store.finishWriting()
        let names = try FileManager.default.subpathsOfDirectory(atPath: store.root)
        #expect(names.count < 12, "files and directories: \(names)")
        var bytes = 0
        for name in names {
            let info = try FileManager.default.attributesOfItem(atPath: "\(store.root)/\(name)")
            bytes += (info[.size] as? Int) ?? 0
        }
        #expect(bytes < 10_000 * 210, "\(bytes) bytes for 10,000 entries")
        #expect(store.scan().flows.count == 10_000)
        #expect(store.lookupFlow(placement: "onboarding", identity: stages[4321])?.1.id == "paywall")
    }

    @Test(
        "identities staged while a batch is written are written together: one hold of the lock, one group, each told its own result"
    )
    func stagedInBatches() async throws {
        let store = try store()
        let document = Self.flow("paywall")
        let other = Self.flow("onboarding")
        // A prune's exclusive lock holds the first batch at its shared lock: the drain has taken it.
        let prune = try CacheStore.Lock(path: store.lockPath, exclusive: true)
        let results = Mutex<[String: [Result<CachedFlow, any Error>]]>([:])
        // The holds of the lock when the first identity is told: its batch's released, the next batch's taken.
        let holdsWhenFirstTold = Mutex<Int?>(nil)
        func stage(_ user: String) {
            store.stage(
                [("paywall", document, 300), ("onboarding", other, 300)], identity: Identity(userID: user),
                tier: .network, resolvedAt: Date(), commit: .shared
            ) { outcome in
                if user == "first" {
                    holdsWhenFirstTold.withLock { $0 = CacheStore.Lock.sharedHoldCount(store.lockPath) }
                }
                results.withLock { $0[user] = outcome }
            }
        }
        stage("first")
        let started = ContinuousClock.now
        // Bounds only for a failure's sake: a suite whose other tests keep the blocking-I/O threads busy for
        // minutes (as a full run beside a ten-million-entry fill did) delays the drain, never changes its batches.
        while store.stageQueue.drained.withLock({ $0.batches }) == 0, ContinuousClock.now - started < .seconds(300) {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(store.stageQueue.drained.withLock { $0.batches } == 1, "the first identity's batch is being written")
        let users = (0..<40).map { "user-\($0)" }
        for user in users { stage(user) }
        #expect(results.withLock { $0.isEmpty }, "nothing written while the prune holds the lock")
        prune.release()
        let released = ContinuousClock.now
        while results.withLock({ $0.count }) < 41, ContinuousClock.now - released < .seconds(300) {
            try await Task.sleep(for: .milliseconds(5))
        }
        let drained = store.stageQueue.drained.withLock { $0 }
        #expect(drained.batches == 2 && drained.items == 41, "the 40 queued meanwhile in one batch: \(drained)")
        for user in ["first"] + users {
            let outcome = try #require(results.withLock { $0[user] }, "\(user) told")
            #expect(try outcome.map { try $0.get().placement } == ["paywall", "onboarding"], "\(user)")
            #expect(store.lookupFlow(placement: "onboarding", identity: Identity(userID: user))?.1.id == "onboarding")
        }
        #expect(CacheStore.Lock.sharedHoldCount(store.lockPath) == 0, "every batch's hold released")
        // The next batch's hold was taken before the first's was released, so the lock stayed held (one `flock`,
        // one tenure in which the objects the first batch stored are known durable without a `stat`).
        #expect(holdsWhenFirstTold.withLock { $0 } == 1, "the first batch's hold released, the second's taken")
    }

    @Test("clear --flows empties log/ and objects/; the marker stays")
    func clear() throws {
        let store = try store()
        try store.storeFlow(placement: "p", identity: alice, document: Self.flow("a"), ttlSeconds: 300, tier: .network)
        let result = try store.clear(.flows)
        #expect(result.failed.isEmpty && result.files >= 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.root).sorted() == [".lock", "fpcache.json"])
        let after = try CacheStore(root: store.root)
        #expect(after.lookupFlow(placement: "p", identity: alice) == nil)
        try after.storeFlow(placement: "p", identity: alice, document: Self.flow("a"), ttlSeconds: 300, tier: .network)
        #expect(after.lookupFlow(placement: "p", identity: alice) != nil)
    }
}
