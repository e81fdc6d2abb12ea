import Foundation
import Testing

@testable import FlowPilotCore

private func flow(_ id: String, version: String = "v1", images: [String] = []) -> FlowDocument {
    let comps = images.map { JSONValue.object(["type": .string("image"), "src": .string($0)]) }
    let json: JSONValue = .object([
        "schema_version": .number(1), "id": .string(id), "version": .string(version),
        "screens": .array([.object(["id": .string("s"), "components": .array(comps)])]),
    ])
    return FlowDocument.validate(json, location: "test").0!
}

@Suite("the cache store")
final class CacheStoreTests {
    /// Every cache directory of one test lives under here, removed when the test ends.
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fpcache-\(UUID().uuidString)").path

    deinit { try? FileManager.default.removeItem(atPath: scratch) }

    private func tempDir() -> String { "\(scratch)/\(UUID().uuidString)" }

    let alice = Identity(userID: "alice", attributes: ["plan": .string("free")])
    let aliceUpgraded = Identity(userID: "alice", attributes: ["plan": .string("pro")])
    let bob = Identity(userID: "bob")

    @Test("a walk spread over the cores finds what one thread would: every key, older files, debris, images")
    func parallelScan() throws {
        let store = try CacheStore(root: tempDir(), create: true, newFormat: 1)
        let fm = FileManager.default
        var expectedFlows = Set<String>()
        var expectedOlder = Set<String>()
        var expectedForeign = Set<String>()
        // 3 placements x 700 keys: enough key directories for several slices per core.
        for placement in ["home", "paywall", "onboarding"] {
            for k in 0..<700 {
                let dir =
                    "\(store.root)/flows/\(placement)/\(String(repeating: "a", count: 60))\(String(format: "%04d", k))~u\(k)"
                try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
                let newest = "\(dir)/01795421046848~zz~300~flow_\(placement)~v2.json"
                #expect(fm.createFile(atPath: newest, contents: Data("{}".utf8)))
                expectedFlows.insert(newest)
                if k % 7 == 0 {
                    let older = "\(dir)/01795421000000~aa~300~flow_\(placement)~v1.json"
                    #expect(fm.createFile(atPath: older, contents: Data("{}".utf8)))
                    expectedOlder.insert(older)
                }
                if k % 11 == 0 {
                    #expect(fm.createFile(atPath: "\(dir)/notes.txt", contents: Data("x".utf8)))
                    expectedForeign.insert("\(dir)/notes.txt")
                }
            }
        }
        for i in 0..<1500 {
            let dir = "\(store.root)/images/\(String(repeating: "b", count: 60))\(String(format: "%04d", i))"
            try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
            #expect(fm.createFile(atPath: "\(dir)/url", contents: Data("https://x/\(i)".utf8)))
            #expect(fm.createFile(atPath: "\(dir)/01795421046848~q.img", contents: Data(count: i)))
        }
        let scan = store.scan()
        #expect(Set(scan.flows.map(\.path)) == expectedFlows)
        #expect(scan.flows.count == expectedFlows.count, "each key once")
        #expect(Set(scan.superseded.map(\.path)) == expectedOlder)
        #expect(Set(scan.foreign.map(\.path)) == expectedForeign)
        #expect(scan.images.count == 1500 && scan.imageURLFiles.count == 1500)
        #expect(scan.imageBytes == Int64((0..<1500).reduce(0, +)))
        // In walk order, as one thread would list them: placement by placement.
        let placements = scan.flows.map(\.placement)
        #expect(placements == placements.sorted { placements.firstIndex(of: $0)! < placements.firstIndex(of: $1)! })
    }

    @Test("slices come back complete and in order, whatever their number")
    func sliceOrder() {
        for count in [0, 1, 511, 512, 5_000, 100_003] {
            let items = Array(0..<count)
            let parts = Parallel.mapSlices(items, minimumPerSlice: 100) { Array($0) }
            #expect(parts.flatMap { $0 } == items, "\(count) items")
        }
    }

    @Test("an entry answers only the identity it was stored for; the alias serves any identity")
    func identityIsolation() throws {
        let store = try CacheStore(root: tempDir(), create: true)
        try store.storeFlow(
            placement: "paywall", identity: alice, document: flow("for_alice"), ttlSeconds: 300, tier: .network)
        #expect(store.lookupFlow(placement: "paywall", identity: alice)?.1.id == "for_alice")
        #expect(store.lookupFlow(placement: "paywall", identity: bob) == nil)
        #expect(
            store.lookupFlow(placement: "paywall", identity: aliceUpgraded) == nil, "new attributes are a new identity")
        #expect(store.lookupAlias(placement: "paywall")?.1.id == "for_alice")
        try store.storeFlow(
            placement: "paywall", identity: bob, document: flow("for_bob"), ttlSeconds: 300, tier: .network)
        #expect(store.lookupAlias(placement: "paywall")?.1.id == "for_bob", "the alias follows the newest resolve")
        #expect(store.lookupFlow(placement: "paywall", identity: alice)?.1.id == "for_alice")
    }

    @Test("a grouped write leaves its key one file: a new key's, a rewritten key's, one left by a killed writer's")
    func groupedWriteLeavesOneFile() async throws {
        let store = try CacheStore(root: tempDir(), create: true, newFormat: 1)
        let commit = GroupCommit(maxBatch: 64, syncThreads: 2)
        func files(_ entry: CachedFlow) throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: PathName.parent(of: entry.path)).sorted()
        }
        let first = try await store.storeFlow(
            placement: "paywall", identity: alice, document: flow("one"), ttlSeconds: 300, tier: .network,
            resolvedAt: Date(timeIntervalSince1970: 1_800_000_000), commit: commit)
        #expect(try files(first) == [PathName.lastComponent(of: first.path)])
        let second = try await store.storeFlow(
            placement: "paywall", identity: alice, document: flow("two"), ttlSeconds: 300, tier: .network,
            resolvedAt: Date(timeIntervalSince1970: 1_800_000_060), commit: commit)
        #expect(try files(second) == [PathName.lastComponent(of: second.path)], "the older entry is removed")
        #expect(store.lookupFlow(placement: "paywall", identity: alice)?.1.id == "two")
        // An older entry a killed writer left beside the newest: the next write takes it away too.
        let stray = PathName.parent(of: second.path) + "/00000000000001~300~one~v1.json"
        try Data(contentsOf: URL(fileURLWithPath: second.path)).write(to: URL(fileURLWithPath: stray))
        let third = try await store.storeFlow(
            placement: "paywall", identity: alice, document: flow("three"), ttlSeconds: 300, tier: .network,
            resolvedAt: Date(timeIntervalSince1970: 1_800_000_120), commit: commit)
        #expect(try files(third) == [PathName.lastComponent(of: third.path)])
        #expect(store.lookupFlow(placement: "paywall", identity: alice)?.1.id == "three")
    }

    @Test("prune --user-id leaves no trace of that identity, and its aliases go with it")
    func pruneIdentity() throws {
        let root = tempDir()
        let store = try CacheStore(root: root, create: true)
        try store.storeFlow(placement: "paywall", identity: bob, document: flow("b"), ttlSeconds: 300, tier: .network)
        try store.storeFlow(
            placement: "onboarding", identity: alice, document: flow("a"), ttlSeconds: 300, tier: .network)
        try store.storeFlow(placement: "paywall", identity: alice, document: flow("a"), ttlSeconds: 300, tier: .network)
        var o = CacheStore.PruneOptions()
        o.userID = "alice"
        let removed = try store.prune(o).removed.array()
        #expect(removed.filter { $0.kind == .flow }.count == 2)
        let everything = FileManager.default.subpaths(atPath: root)!.joined(separator: "\n")
        #expect(!everything.contains("alice"))
        #expect(!everything.contains(alice.fingerprint))
        #expect(store.lookupAlias(placement: "onboarding") == nil)
        #expect(store.lookupFlow(placement: "paywall", identity: bob)?.1.id == "b")
    }

    @Test("freshness follows the TTL; a lapsed entry stays as the last-known-good")
    func freshness() throws {
        let store = try CacheStore(root: tempDir(), create: true)
        let past = Date().addingTimeInterval(-120)
        try store.storeFlow(
            placement: "p", identity: alice, document: flow("f"), ttlSeconds: 60, tier: .network, resolvedAt: past)
        let (entry, _) = try #require(store.lookupFlow(placement: "p", identity: alice))
        #expect(!entry.isFresh(at: Date()))
        #expect(entry.isFresh(at: past.addingTimeInterval(59)))
        #expect(store.scan().flows.count == 1)
    }

    @Test("corrupt, truncated, empty and foreign files are misses, findings, and repaired away")
    func corruption() throws {
        let root = tempDir()
        let store = try CacheStore(root: root, create: true, newFormat: 1)
        let stored = try store.storeFlow(
            placement: "p", identity: alice, document: flow("f"), ttlSeconds: 60, tier: .network)
        let other = try store.storeFlow(
            placement: "q", identity: bob, document: flow("g"), ttlSeconds: 60, tier: .network)
        let original = try Data(contentsOf: URL(fileURLWithPath: stored.path))
        for damage in [
            original.prefix(original.count / 2), Data(), Data("{\"placement\":\"p\"}".utf8), Data(original.reversed()),
        ] {
            try damage.write(to: URL(fileURLWithPath: stored.path))
            #expect(store.lookupFlow(placement: "p", identity: alice) == nil)
            #expect(try store.verify(repair: false).findings.contains { $0.rule == "cache-corrupt-entry" })
        }
        try Data("junk".utf8).write(to: URL(fileURLWithPath: "\(root)/flows/p/stray.bin"))
        try Data("junk".utf8).write(to: URL(fileURLWithPath: "\(root)/notes.txt"))
        let verification = try store.verify(repair: true)
        let findings = verification.findings
        #expect(verification.notRemoved.isEmpty)
        #expect(Set(findings.map(\.rule)) == ["cache-corrupt-entry", "cache-foreign-file", "cache-dangling-alias"])
        #expect(try store.verify(repair: false).findings.isEmpty)
        #expect(store.lookupFlow(placement: "q", identity: bob)?.1.id == "g", "repair removed only what was broken")
        _ = other
    }

    @Test("a directory written by a newer format is refused and left untouched")
    func newerFormat() throws {
        let root = tempDir()
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let marker = Data(#"{"format":"fpcache","version":3}"#.utf8)
        try marker.write(to: URL(fileURLWithPath: "\(root)/fpcache.json"))
        #expect(throws: FPError.self) { try CacheStore(root: root, create: true) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(root)/fpcache.json")) == marker)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == ["fpcache.json"])
    }

    @Test("image LRU is global, by the access times the cache records, and the budget holds after every write")
    func imageBudget() throws {
        var budgets = CacheStore.Budgets()
        budgets.imageDiskBytes = 10_000
        let store = try CacheStore(root: tempDir(), create: true, budgets: budgets)
        let t0 = Date().addingTimeInterval(-1000)
        for i in 0..<4 {
            try store.storeImage(
                url: "https://cdn/\(i).png", data: Data(repeating: UInt8(i), count: 2000),
                now: t0.addingTimeInterval(Double(i)))
        }
        // Touch image 0 so it becomes the most recently used.
        #expect(store.image(url: "https://cdn/0.png", now: t0.addingTimeInterval(100)) != nil)
        for i in 4..<12 {
            try store.storeImage(
                url: "https://cdn/\(i).png", data: Data(repeating: UInt8(i), count: 2000),
                now: t0.addingTimeInterval(200 + Double(i)))
            #expect(store.scan().imageBytes <= budgets.imageDiskBytes, "over budget after write \(i)")
        }
        #expect(
            !store.hasImage(url: "https://cdn/1.png", now: t0.addingTimeInterval(300)), "least recently used went first"
        )
        #expect(
            try store.storeImage(url: "https://cdn/huge.png", data: Data(count: 20_000)) == false,
            "larger than the budget: refused")
    }

    @Test("the image budget is the volume's: a writer counts what another writer on the same cache added")
    func imageBudgetWithTwoWriters() throws {
        var budgets = CacheStore.Budgets()
        budgets.imageDiskBytes = 100_000
        let root = tempDir()
        // Two writers of one cache, as two pods on a shared volume: each its own process's tally.
        let first = try CacheStore(root: root, create: true, budgets: budgets)
        let second = try CacheStore(root: root, budgets: budgets)
        let t0 = Date().addingTimeInterval(-1000)
        // The first measures the disk with its first write, then the second fills 60% of the budget.
        try first.storeImage(url: "https://cdn/first-0.png", data: Data(count: 1000), now: t0)
        for i in 0..<6 {
            try second.storeImage(
                url: "https://cdn/second-\(i).png", data: Data(count: 10_000), now: t0.addingTimeInterval(Double(i)))
        }
        // The first adds 60% more in small images, within a second: it must see the disk, not only its own.
        for i in 1...60 {
            try first.storeImage(
                url: "https://cdn/first-\(i).png", data: Data(count: 1000), now: t0.addingTimeInterval(100 + Double(i)))
        }
        #expect(first.scan().imageBytes <= budgets.imageDiskBytes, "\(first.scan().imageBytes) bytes on disk")
    }

    @Test("images expire after their TTL and prune --expired removes them")
    func imageTTL() throws {
        let store = try CacheStore(root: tempDir(), create: true)
        let old = Date().addingTimeInterval(-8 * 86400)
        try store.storeImage(url: "https://cdn/old.png", data: Data(count: 10), now: old)
        try store.storeImage(url: "https://cdn/new.png", data: Data(count: 10))
        #expect(store.image(url: "https://cdn/old.png") == nil)
        var o = CacheStore.PruneOptions()
        o.expired = true
        #expect(try store.prune(o).removed.array().map(\.kind) == [.image])
        #expect(store.scan().images.count == 1)
    }

    @Test("unreferenced media and fonts are garbage once no cached flow uses them")
    func unreferenced() throws {
        let store = try CacheStore(root: tempDir(), create: true)
        try store.storeFlow(
            placement: "p", identity: alice, document: flow("f", images: ["https://cdn/used.png"]), ttlSeconds: 60,
            tier: .network)
        try store.storeImage(url: "https://cdn/used.png", data: Data(count: 10))
        try store.storeImage(url: "https://cdn/orphan.png", data: Data(count: 10))
        _ = try store.storeFont(Data("font".utf8), sha256: nil, ext: "ttf")
        var o = CacheStore.PruneOptions()
        o.unreferenced = true
        o.dryRun = true
        let removed = try store.prune(o).removed.array()
        #expect(removed.map(\.kind.rawValue).sorted() == ["font", "image"])
        #expect(store.scan().images.count == 2, "dry run removes nothing")
    }
}
