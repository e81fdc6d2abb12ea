import Foundation
import Testing

@testable import FlowPilotCore

/// `cache info` of a format-2 log at rest answers from the summary its last
/// compaction wrote (#62: ten million entries in a second), and says exactly
/// what a walk of every entry says; anything that changes the log, and a
/// `now` whose freshness the summary cannot tell, sends it back to the walk.
@Suite("format-2 log summary")
final class LogSummaryTests {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("summary-\(UUID().uuidString)").path

    deinit { try? FileManager.default.removeItem(atPath: scratch) }

    /// A fixed instant on a whole second, and the entries' times around it.
    static let base = Date(timeIntervalSince1970: 1_795_000_000)

    /// Three placements, TTLs of 0, 60 and 3600 s, times from two hours
    /// before `base` to ten minutes after it (from the future), some keys
    /// written twice (a second writer's newer record), two aliases; compacted.
    func restingCache() throws -> CacheStore {
        let root = "\(scratch)/\(UUID().uuidString)"
        let first = try CacheStore(root: root, create: true, newFormat: 2)
        for n in 0..<120 {
            let at = Self.base + Double(n * 97 % 7800 - 7200) + Double(n % 10) * 0.0137
            try first.storeFlow(
                placement: ["paywall", "onboarding", "caf\u{e9}"][n % 3], identity: Identity(userID: "user-\(n)"),
                document: LogDamageTests.flow("v1"), ttlSeconds: [0, 60, 3600][n % 3 == 0 ? n % 2 : 2],
                tier: .network, resolvedAt: at, pointAlias: n < 6)
        }
        first.finishWriting()
        let second = try CacheStore(root: root)
        for n in stride(from: 0, to: 120, by: 7) {
            try second.storeFlow(
                placement: ["paywall", "onboarding", "caf\u{e9}"][n % 3], identity: Identity(userID: "user-\(n)"),
                document: LogDamageTests.flow("v2"), ttlSeconds: 3600, tier: .network,
                resolvedAt: Self.base - Double(n), pointAlias: false)
        }
        second.finishWriting()
        _ = try second.log.compact { _, _ in true }
        return try CacheStore(root: root)
    }

    /// A summary as JSON, every field, for comparing two.
    static func json(_ summary: CacheSummary) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return String(decoding: try encoder.encode(summary), as: UTF8.self)
    }

    @Test("after a compaction, info from the summary is info from every entry, at times before, among and after them")
    func sameAsWalk() throws {
        let store = try restingCache()
        #expect(FileManager.default.fileExists(atPath: "\(store.root)/log/\(LogSummary.fileName)"))
        var answered = 0
        for offset in [-100_000.0, -3000.5, -61.25, 0.5, 59.75, 600.5, 3599.5, 4000.5, 100_000] {
            let now = Self.base + offset
            let walked = try Self.json(store.walkedSummary(at: now))
            if let resting = store.restingSummary(at: now) {
                answered += 1
                #expect(try Self.json(resting) == walked, "at base + \(offset)")
            }
            #expect(try Self.json(store.summary(at: now)) == walked, "at base + \(offset)")
        }
        #expect(answered >= 7, "the summary answers wherever no entry turns fresh or stale in now's second")
        let walked = store.walkedSummary(at: Self.base)
        #expect(walked.flows == 120 && walked.aliases == 3 && walked.placements.count == 3)
    }

    @Test("a now in a second where an entry turns fresh or stale is counted by the walk, not guessed")
    func boundaryWalks() throws {
        let store = try restingCache()
        // user-1 (onboarding, TTL 3600) was resolved at base + 97 - 7200 + 0.0137: stale an hour later.
        let end = Self.base + Double(97 - 7200) + 0.0137 + 3600
        #expect(store.restingSummary(at: end) == nil)
        for now in [end - 0.0005, end, end + 0.0005] {
            #expect(try Self.json(store.summary(at: now)) == Self.json(store.walkedSummary(at: now)))
        }
    }

    @Test("any change to the log after the compaction sends info back to the walk", arguments: 0..<6)
    func changesInvalidate(change: Int) throws {
        let store = try restingCache()
        #expect(store.restingSummary(at: Self.base + 0.5) != nil)
        let log = "\(store.root)/log"
        let segments = try FileManager.default.contentsOfDirectory(atPath: log).filter { $0.hasSuffix(".seg") }.sorted()
        let segment = try #require(segments.first)
        switch change {
        case 0:
            // A new writer's entry: a new segment.
            let writer = try CacheStore(root: store.root)
            try writer.storeFlow(
                placement: "paywall", identity: Identity(userID: "late"), document: LogDamageTests.flow("v3"),
                ttlSeconds: 60, tier: .network, resolvedAt: Self.base - 5, pointAlias: false)
            writer.finishWriting()
        case 1:
            // A byte flipped in place: the same size, a new change time.
            let handle = try #require(FileHandle(forUpdatingAtPath: "\(log)/\(segment)"))
            try handle.seek(toOffset: 40)
            let byte = try #require(try handle.read(upToCount: 1)?.first)
            try handle.seek(toOffset: 40)
            try handle.write(contentsOf: [byte ^ 0x20])
            try handle.close()
        case 2: #expect(truncate("\(log)/\(segment)\(LogSegment.indexSuffix)", 100) == 0)
        case 3: #expect(unlink("\(log)/\(segment)") == 0 && unlink("\(log)/\(segment)\(LogSegment.indexSuffix)") == 0)
        case 4: try Data("{\"version\":1,\"files\":[".utf8).write(to: URL(fileURLWithPath: "\(log)/summary.json"))
        default:
            // A summary naming a placement twice (damage, or a hand's edit) is not read, and nothing traps.
            let json = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: "\(log)/summary.json")))
            var summary = try #require(LogSummary(json: json))
            summary.placements.append(summary.placements[0])
            try CanonicalJSON.data(summary.json).write(to: URL(fileURLWithPath: "\(log)/summary.json"))
        }
        let reopened = try CacheStore(root: store.root)
        let now = Self.base + 0.5
        #expect(reopened.restingSummary(at: now) == nil, "change \(change)")
        #expect(try Self.json(reopened.summary(at: now)) == Self.json(reopened.walkedSummary(at: now)))
    }

    @Test("verify does not call the summary a foreign file, and a writer's segment live beside a compaction gets none")
    func verifyAndLive() throws {
        let store = try restingCache()
        #expect(try store.verify(repair: false).findings.isEmpty)
        // A writer holding its segment open: the compaction leaves it in place and writes no summary.
        let writer = try CacheStore(root: store.root)
        try writer.storeFlow(
            placement: "paywall", identity: Identity(userID: "live"), document: LogDamageTests.flow("v3"),
            ttlSeconds: 60, tier: .network, resolvedAt: Self.base, pointAlias: false)
        let other = try CacheStore(root: store.root)
        _ = try other.log.compact { _, _ in true }
        #expect(!FileManager.default.fileExists(atPath: "\(store.root)/log/\(LogSummary.fileName)"))
        writer.finishWriting()
    }

    @Test("a compaction of more placements than the summary's bound writes none, and info walks")
    func manyPlacements() throws {
        var builder = FlowLog.SummaryBuilder()
        for n in 0...LogSummary.maxPlacements {
            builder.add(
                LogRecord(
                    kind: .entry, tier: .network, resolvedAtMillis: 1_795_000_000_000, unique: UInt64(n),
                    ttlSeconds: 60, fingerprint: String(repeating: "ab", count: 32), placement: "p\(n)", userID: "u"))
        }
        #expect(builder.abandoned && builder.placements.isEmpty, "nothing held past the bound")
        // And through a real compaction: no summary file, the walk's answer.
        let root = "\(scratch)/\(UUID().uuidString)"
        let store = try CacheStore(root: root, create: true, newFormat: 2)
        for n in 0...LogSummary.maxPlacements {
            try store.storeFlow(
                placement: "p\(n)", identity: Identity(userID: "u"), document: LogDamageTests.flow("v1"),
                ttlSeconds: 60, tier: .network, resolvedAt: Self.base, pointAlias: false)
        }
        store.finishWriting()
        _ = try store.log.compact { _, _ in true }
        #expect(!FileManager.default.fileExists(atPath: "\(root)/log/\(LogSummary.fileName)"))
        #expect(try CacheStore(root: root).summary(at: Self.base).flows == LogSummary.maxPlacements + 1)
    }

    @Test("a placement's buckets coarsen past their bound and still count exactly what isFresh says")
    func coarsened() {
        var placement = LogSummary.Placement(placement: "p")
        var entries: [(Int64, UInt32)] = []
        var generator = SystemRandomNumberGenerator()
        for n in 0..<(LogSummary.maxBuckets * 3) {
            // Times over about five days, TTLs of 0 to two hours.
            let at = Int64(1_795_000_000_000) + Int64(n) * 137_003 + Int64.random(in: 0..<999, using: &generator)
            let ttl = UInt32([0, 1, 300, 7200][n % 4])
            entries.append((at, ttl))
            placement.add(resolvedAt: at, ttlSeconds: ttl, size: 10)
        }
        #expect(placement.granularity > LogSummary.granularities[0])
        #expect(placement.starts.count <= LogSummary.maxBuckets && placement.ends.count <= LogSummary.maxBuckets)
        var answered = 0
        for _ in 0..<200 {
            let now = Int64(1_795_000_000_000) + Int64.random(in: -86_400_000..<(86_400_000 * 7), using: &generator)
            guard let fresh = placement.fresh(at: now) else { continue }
            answered += 1
            let date = Date(timeIntervalSince1970: Double(now) / 1000)
            let expected = entries.count {
                CachedFlow.isFresh(resolvedAt: LogRecord.date(millis: $0.0), ttlSeconds: Int($0.1), at: date)
            }
            #expect(fresh == expected, "at \(now)")
        }
        #expect(answered > 0)
    }
}
