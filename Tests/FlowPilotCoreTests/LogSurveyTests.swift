import Foundation
import Testing

@testable import FlowPilotCore

/// The survey that lets `cache info`, `list`, `verify` and `prune` read a
/// format-2 log in flat memory (#62) finds, of each key, the record a
/// lookup serves, across sealed and unsealed segments, over several ranges
/// of key prefixes, and tells keys apart whose prefixes collide.
@Suite("format-2 survey")
final class LogSurveyTests {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("survey-\(UUID().uuidString)").path

    deinit { try? FileManager.default.removeItem(atPath: scratch) }

    static func user(_ n: Int) -> Identity { Identity(userID: "user-\(n)") }

    /// Writers one after another, each a segment of its own: users written
    /// again and again with a version naming the writer; the last writer's
    /// segment left unsealed (a writer still running).
    func manyWriters(_ root: String) throws -> [Int: String] {
        var expected: [Int: String] = [:]
        let base = Date() - 600
        for writer in 0..<6 {
            let store = try CacheStore(root: root, create: writer == 0, newFormat: 2)
            let users = stride(from: writer * 7 % 5, to: 240, by: writer + 1)
            for n in users {
                let version = "w\(writer)"
                try store.storeFlow(
                    placement: n % 2 == 0 ? "paywall" : "onboarding", identity: Self.user(n),
                    document: LogDamageTests.flow(version), ttlSeconds: 300, tier: .network,
                    resolvedAt: base + Double(writer * 10), pointAlias: n % 25 == 0)
                expected[n] = version
            }
            if writer < 5 { store.finishWriting() }
        }
        return expected
    }

    @Test("of each key the newest record survives, over sealed and unsealed segments and many prefix ranges")
    func survivors() throws {
        let root = "\(scratch)/many"
        let expected = try manyWriters(root)
        let store = try CacheStore(root: root)
        #expect(store.log.segments().count == 6)
        #expect(store.log.segments().filter { $0.index == nil }.count == 1, "the last writer's segment is unsealed")
        // Ranges of prefixes, and buckets of repeated records (one bucket held in memory; many, spilled in
        // pieces of 16 KiB, or of 64 bytes, less than a record).
        // The last: no scratch file to be had (a read-only TMPDIR), the pieces held in memory.
        for (rangeSlots, bucketBytes, bufferBytes, directory) in [
            (LogSurvey.rangeSlots, WeighedBuckets.bucketBytes, WeighedBuckets.bufferBytes, nil),
            (16, 400, 16 << 10, nil), (1, 1, 64, nil), (16, 400, 64, "\(scratch)/no-such-directory"),
        ] {
            var scan = store.scan()
            let survey = LogSurvey(
                store.log, rangeSlots: rangeSlots, bucketBytes: bucketBytes, bufferBytes: bufferBytes,
                spillDirectory: directory)
            scan.logWalk = LogWalk(log: store.log, survey: survey)
            var listed: [String: String] = [:]
            var (older, handed) = (0, 0)
            scan.walk(
                flow: {
                    listed[$0.fingerprint] = $0.version
                    handed += 1
                }, superseded: { _ in older += 1 })
            #expect(handed == expected.count, "one entry a key (\(rangeSlots) slots a range)")
            for (n, version) in expected {
                #expect(listed[Self.user(n).fingerprint] == version, "user \(n), \(rangeSlots) slots a range")
                let placement = n % 2 == 0 ? "paywall" : "onboarding"
                #expect(store.lookupFlow(placement: placement, identity: Self.user(n))?.1.version == version)
            }
            // Every record written is either a key's survivor or superseded: none is lost or counted twice.
            var records = 0
            _ = store.log.scan { _, _, _, record, _ in if record.kind == .entry { records += 1 } }
            #expect(
                handed + older + scan.aliases.count == records + aliasRecords(store), "every record accounted for once")
            #expect(scan.aliases.count == 2, "one alias a placement")
        }
    }

    /// The alias records in the log, each placement's newest and the older ones.
    func aliasRecords(_ store: CacheStore) -> Int {
        var aliases = 0
        _ = store.log.scan { _, _, _, record, _ in if record.kind == .alias { aliases += 1 } }
        return aliases
    }

    @Test("a few keys written again in a large segment are weighed record by record, the newest by time winning")
    func sparseRepeats() throws {
        let root = "\(scratch)/sparse"
        let base = Date() - 600
        let first = try CacheStore(root: root, create: true, newFormat: 2)
        for n in 0..<1_000 {
            try first.storeFlow(
                placement: "paywall", identity: Self.user(n), document: LogDamageTests.flow("first"), ttlSeconds: 300,
                tier: .network, resolvedAt: base + 10, pointAlias: false)
        }
        first.finishWriting()
        // A second writer: user 3 newer, user 4 older (the first segment's record stays its survivor).
        let second = try CacheStore(root: root, newFormat: 2)
        for (n, at) in [(3, base + 20), (4, base)] {
            try second.storeFlow(
                placement: "paywall", identity: Self.user(n), document: LogDamageTests.flow("second"), ttlSeconds: 300,
                tier: .network, resolvedAt: at, pointAlias: false)
        }
        second.finishWriting()
        let store = try CacheStore(root: root)
        let survey = LogSurvey(store.log)
        let large = try #require(survey.parts.max { $0.length < $1.length })
        #expect(large.repeatedCount == 2 && large.repeatedOffsets?.count == 2, "sparse: its two offsets kept")
        var scan = store.scan()
        scan.logWalk = LogWalk(log: store.log, survey: survey)
        var versions: [String: String] = [:]
        var older = 0
        scan.walk(flow: { versions[$0.fingerprint] = $0.version }, superseded: { _ in older += 1 })
        #expect(versions.count == 1_000 && older == 2)
        #expect(versions[Self.user(3).fingerprint] == "second" && versions[Self.user(4).fingerprint] == "first")
        #expect(versions[Self.user(5).fingerprint] == "first")
    }

    @Test("repeated records are spread over the buckets evenly by their fingerprint's first two bytes")
    func bucketsSpread() {
        let buckets = WeighedBuckets(records: 4_000_000)
        #expect(buckets.buckets == 4_000_000 * 80 / WeighedBuckets.bucketBytes + 1)
        #expect(buckets.bucket(of: 0) == 0 && buckets.bucket(of: 0xFFFF) == buckets.buckets - 1)
        #expect(buckets.bucket(of: 0x8000) == buckets.buckets / 2)
        let sizes = Dictionary(grouping: 0..<0x10000, by: buckets.bucket(of:)).values.map(\.count)
        #expect(sizes.count == buckets.buckets && sizes.max()! - sizes.min()! <= 1)
        #expect(WeighedBuckets(records: 1_000_000_000).buckets == WeighedBuckets.maxBuckets)
    }

    @Test("the first pass's prefix table tells a prefix met twice from those met once, its low bits shared or zero")
    func prefixCounts() {
        // Prefixes that share their low bits all probe from one place, and 0 is a prefix like any other.
        let once = (0..<40).map { UInt64($0) << 40 }
        let twice: [UInt64] = [once[7], once[0], 0x1234_5678_9ABC_DEF0]
        var counts = LogSurvey.PrefixCounts(capacity: once.count + twice.count)
        for prefix in once + twice + [0x1234_5678_9ABC_DEF0] { counts.add(prefix) }
        #expect(once.filter { counts.isRepeated($0) } == [once[0], once[7]])
        #expect(counts.isRepeated(0x1234_5678_9ABC_DEF0))
        #expect(!counts.isRepeated(0x1234_5678_9ABC_DEF1), "a prefix never added is not repeated")
    }

    @Test("keys whose index prefixes collide are told apart by their whole key")
    func collidingPrefixes() throws {
        let root = "\(scratch)/collide"
        let store = try CacheStore(root: root, create: true, newFormat: 2)
        let then = Date() - 60
        for (n, version, at) in [(1, "old", then), (2, "old", then), (1, "new", then + 5)] {
            try store.storeFlow(
                placement: "paywall", identity: Self.user(n), document: LogDamageTests.flow(version), ttlSeconds: 300,
                tier: .network, resolvedAt: at, pointAlias: false)
        }
        store.finishWriting()
        let segment = try #require(store.log.segments().first)
        let index = try #require(segment.index)
        // The index made again with every record under user 1's prefix, as if user 2's collided with it.
        let prefix = LogKey.entry(placement: "paywall", fingerprint: Self.user(1).fingerprint).prefix
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: segment.path)))
        let offsets = bytes.withUnsafeBytes { LogSegment.records(in: $0).records.map(\.offset) }
        #expect(offsets.count == 3)
        let forged = SegmentIndex.encode(offsets.map { (prefix, UInt32($0)) }, covering: UInt64(bytes.count))
        try Data(forged).write(to: URL(fileURLWithPath: index))
        let listed = try CacheStore(root: root).scan().flows
        #expect(listed.count == 2, "two keys, not one prefix")
        #expect(listed.first { $0.fingerprint == Self.user(1).fingerprint }?.version == "new")
        #expect(listed.first { $0.fingerprint == Self.user(2).fingerprint }?.version == "old")
    }

    @Test("a listing past one sorted batch is merged from a temporary file into the order one sort gives")
    func sortedListing() throws {
        let root = "\(scratch)/list"
        _ = try manyWriters(root)
        // Some keys written again just now, so a freshness filter splits the listing.
        let fresh = try CacheStore(root: root)
        for n in stride(from: 0, to: 60, by: 3) {
            try fresh.storeFlow(
                placement: n % 2 == 0 ? "paywall" : "onboarding", identity: Self.user(n),
                document: LogDamageTests.flow("now"), ttlSeconds: 300, tier: .network, pointAlias: false)
        }
        fresh.finishWriting()
        let scan = try CacheStore(root: root).scan()
        let tmp = "\(scratch)/tmp"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        let now = Date()
        // Every field a row shows, as the whole-listing path (each record made a `CachedFlow`, then sorted) gives it.
        func fields(_ e: CachedFlow) -> String {
            [
                e.placement, e.fingerprint, e.userID ?? "nil", e.flowID, e.version,
                "\(e.resolvedAt.timeIntervalSince1970)",
                "\(e.ttlSeconds)", "\(e.size)", e.path, e.flowSHA256 ?? "nil", "\(e.inLog)",
            ].joined(separator: "|")
        }
        let filters: [(String?, String?, CacheScan.Freshness?)] = [
            (nil, nil, nil), ("paywall", nil, nil), (nil, Self.user(4).userID, nil), (nil, nil, .fresh),
            ("onboarding", nil, .stale),
        ]
        for (placement, userID, freshness) in filters {
            let whole = scan.flows(placement: placement, userID: userID, freshness: freshness, at: now).map(fields)
            #expect(!whole.isEmpty)
            for run in [1, 7, 64, 100_000] {
                var merged: [String] = []
                try scan.forEachFlow(
                    placement: placement, userID: userID, freshness: freshness, at: now, runLength: run,
                    spillDirectory: tmp
                ) {
                    merged.append(fields($0))
                }
                #expect(
                    merged == whole,
                    "batches of \(run), \(placement ?? "-") \(userID ?? "-") \(String(describing: freshness))")
                // Handed on still encoded, 5 at a time (as `cache list` takes them): the same entries, in order.
                var sizes: [Int] = []
                var batched: [String] = []
                try scan.forEachFlow(
                    placement: placement, userID: userID, freshness: freshness, at: now, runLength: run,
                    spillDirectory: tmp, batch: 5
                ) { batch in
                    sizes.append(batch.count)
                    for index in 0..<batch.count { batched.append(batch.entry(index).map(fields) ?? "undecoded") }
                }
                #expect(batched == whole, "encoded batches, runs of \(run)")
                #expect(sizes.dropLast().allSatisfy { $0 == 5 } && (1...5).contains(sizes.last ?? 0))
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty, "no temporary file left behind")
    }

    @Test(
        "format 1's flows are read in batches as readdir lists them, every key once, and a migration carries them all")
    func formatOneBatches() throws {
        let root = "\(scratch)/format1"
        let store = try CacheStore(root: root, create: true, newFormat: 1)
        for n in 0..<50 {
            try store.storeFlow(
                placement: n % 2 == 0 ? "paywall" : "onboarding", identity: Self.user(n),
                document: LogDamageTests.flow("v\(n)"), ttlSeconds: 300, tier: .network, pointAlias: n == 0)
        }
        var batches: [Int] = []
        var seen = Set<String>()
        try store.walkFormatOneFlows(chunk: 7) { batch in
            batches.append(batch.count)
            for entry in batch { seen.insert(entry.placement + "/" + entry.fingerprint) }
        }
        #expect(batches.allSatisfy { $0 <= 7 } && batches.reduce(0, +) == 50, "\(batches)")
        #expect(seen.count == 50, "every key once")
        let migration = try store.migrate()
        #expect(migration.entries == 50 && migration.aliases == 1)
        let migrated = try CacheStore(root: root)
        for n in 0..<50 {
            let placement = n % 2 == 0 ? "paywall" : "onboarding"
            #expect(migrated.lookupFlow(placement: placement, identity: Self.user(n))?.1.version == "v\(n)")
        }
    }
}
