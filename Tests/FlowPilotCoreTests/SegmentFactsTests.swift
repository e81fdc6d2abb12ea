import Foundation
import Testing

@testable import FlowPilotCore

/// `cache info` of a format-2 log with writes since its last compaction
/// answers from each sealed segment's index and facts (#62: ten million
/// entries in a second), and says exactly what a walk of every record says:
/// whatever the keys written twice, the clocks, the damaged flows, the
/// writers still appending and the facts that no longer hold.
@Suite("format-2 segment facts")
final class SegmentFactsTests {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("facts-\(UUID().uuidString)").path

    deinit { try? FileManager.default.removeItem(atPath: scratch) }

    static let base = LogSummaryTests.base
    static let placements = ["paywall", "onboarding", "caf\u{e9}"]

    /// Three writers, no compaction: 150 keys over three placements (TTLs
    /// 0, 60 and 3600 s, some from the future), aliases; a second writer's
    /// newer records for a seventh of them; a third's records of one
    /// millisecond for a few keys the second wrote (their order is their
    /// `unique`), and newer ones whose flow is then damaged (never served:
    /// the older record is the key's). Each writer's segments sealed.
    func unsettledCache() throws -> CacheStore {
        let root = "\(scratch)/\(UUID().uuidString)"
        let first = try CacheStore(root: root, create: true, newFormat: 2)
        for n in 0..<150 {
            let at = Self.base + Double(n * 97 % 7800 - 7200) + Double(n % 10) * 0.0137
            try first.storeFlow(
                placement: Self.placements[n % 3], identity: LogDamageTests.user(n),
                document: LogDamageTests.flow("v1"), ttlSeconds: [0, 60, 3600][n % 3 == 0 ? n % 2 : 2],
                tier: .network, resolvedAt: n % 29 == 0 ? Self.base + 600 : at, pointAlias: n < 6)
        }
        first.finishWriting()
        let second = try CacheStore(root: root)
        for n in stride(from: 0, to: 150, by: 7) {
            try second.storeFlow(
                placement: Self.placements[n % 3], identity: LogDamageTests.user(n),
                document: LogDamageTests.flow("v2"), ttlSeconds: 3600, tier: .network,
                resolvedAt: Self.base - Double(n), pointAlias: n == 14)
        }
        second.finishWriting()
        let third = try CacheStore(root: root)
        for n in stride(from: 0, to: 40, by: 7) {
            // The same millisecond as the second writer's record of the key.
            try third.storeFlow(
                placement: Self.placements[n % 3], identity: LogDamageTests.user(n),
                document: LogDamageTests.flow("v3"), ttlSeconds: 60, tier: .network,
                resolvedAt: Self.base - Double(n), pointAlias: false)
        }
        for n in stride(from: 1, to: 150, by: 11) {
            try third.storeFlow(
                placement: Self.placements[n % 3], identity: LogDamageTests.user(n),
                document: LogDamageTests.flow("v4"), ttlSeconds: 3600, tier: .network,
                resolvedAt: Self.base + 30, pointAlias: false)
        }
        third.finishWriting()
        // v4's object damaged: those keys' older records are what lookups serve.
        let v4 = try #require(
            third.log.newestEntry(placement: "onboarding", fingerprint: LogDamageTests.user(1).fingerprint))
        let object = third.log.objectPath(v4.0.flowSHA256)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: object))
        bytes[bytes.count / 2] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: object))
        return try CacheStore(root: root)
    }

    static func json(_ summary: CacheSummary) throws -> String { try LogSummaryTests.json(summary) }

    /// Every entry a walk hands on, each as a line of its fields and the record it was read from, sorted.
    static func listed(_ scan: CacheScan) -> [String] {
        var (scan, rows) = (scan, [String]())
        scan.walk { flow in
            rows.append(
                "\(flow.path) \(flow.placement) \(flow.userID ?? "-") \(flow.flowID) \(flow.version) "
                    + "\(flow.resolvedAt.timeIntervalSince1970) \(flow.ttlSeconds) \(flow.size)")
        }
        return rows.sorted()
    }

    /// `cache list`'s scan (superseded records decided by the facts) hands on what the walk's does.
    static func listsAsWalk(_ store: CacheStore, facts: Bool, _ note: String) {
        #expect((LogSurvey.decidedByFacts(store.log) != nil) == facts, "\(note): decided by the facts")
        let walked = listed(store.scan())
        #expect(walked.count > 100, "\(note)")
        #expect(listed(store.scanForListing()) == walked, "\(note)")
    }

    /// Every instant the tests compare at: before, among and after the entries' times and TTLs.
    static let instants = [-100_000.0, -7200, -3000.5, -61.25, 0, 0.5, 59.75, 600.5, 3599.5, 4000.5, 100_000]

    @Test(
        "info from the segments' facts is info from every record, with keys written twice, clocks ahead, ties and damaged flows"
    )
    func sameAsWalk() throws {
        let store = try unsettledCache()
        let log = "\(store.root)/log"
        let names = try FileManager.default.contentsOfDirectory(atPath: log)
        let segments = names.filter { $0.hasSuffix(LogSegment.suffix) }
        #expect(segments.count == 3)
        for segment in segments {
            #expect(names.contains(segment + SegmentFacts.suffix), "\(segment): sealed with its facts")
        }
        #expect(!names.contains(LogSummary.fileName), "no compaction: no summary to answer from")
        let survey = try #require(FactsSurvey(store.log, inMemorySlots: 0), "every segment's facts hold")
        for offset in Self.instants {
            let now = Self.base + offset
            let walked = try Self.json(store.walkedSummary(at: now))
            #expect(try Self.json(#require(store.factsSummary(at: now))) == walked, "at base + \(offset)")
            #expect(try Self.json(store.summary(at: now)) == walked, "at base + \(offset)")
            // Ranges of a few keys each: every key's records still meet in one range.
            let counts = try #require(survey.counts(at: now, rangeSlots: 8))
            let walkedSummary = store.walkedSummary(at: now)
            #expect(counts.placements.reduce(0) { $0 + $1.entries } == walkedSummary.flows)
            #expect(counts.placements.reduce(0) { $0 + $1.fresh } == walkedSummary.fresh)
        }
        Self.listsAsWalk(store, facts: true, "sealed")
        let walked = store.walkedSummary(at: Self.base)
        #expect(walked.flows == 150 && walked.aliases == 3)
        // The damaged v4 is served nowhere: its keys' bytes are v1's or v2's (the same size), never v4's.
        #expect(
            walked.flowBytes == 150
                * Int64(
                    try #require(
                        store.log.newestEntry(placement: "paywall", fingerprint: LogDamageTests.user(0).fingerprint)
                    ).1.count))
    }

    @Test("a writer still appending is counted from its segment's bytes, as the walk counts it")
    func liveWriter() throws {
        let store = try unsettledCache()
        let writer = try CacheStore(root: store.root)
        for n in stride(from: 3, to: 150, by: 5) {
            try writer.storeFlow(
                placement: Self.placements[n % 3], identity: LogDamageTests.user(n),
                document: LogDamageTests.flow("v5"), ttlSeconds: 60, tier: .network, resolvedAt: Self.base + 1,
                pointAlias: false)
        }
        let reader = try CacheStore(root: store.root)
        #expect(FactsSurvey(reader.log, inMemorySlots: 0) == nil, "an unsealed segment has no facts")
        Self.listsAsWalk(reader, facts: true, "a live writer")
        for offset in Self.instants {
            let now = Self.base + offset
            #expect(
                try Self.json(#require(reader.factsSummary(at: now))) == Self.json(reader.walkedSummary(at: now)),
                "at base + \(offset)")
        }
        writer.finishWriting()
    }

    @Test(
        "facts that no longer hold are not trusted: info reads that segment's records, verify says so, --repair mends",
        arguments: 0..<4)
    func damagedFacts(change: Int) throws {
        let store = try unsettledCache()
        let log = "\(store.root)/log"
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: log).filter { $0.hasSuffix(LogSegment.suffix) }.sorted()
                .first)
        let facts = "\(log)/\(segment)\(SegmentFacts.suffix)"
        #expect(try store.verify(repair: false).findings.count == 1, "the damaged v4 object alone")
        switch change {
        case 0:
            // A flipped byte in a slot: the CRC fails.
            var bytes = try Data(contentsOf: URL(fileURLWithPath: facts))
            bytes[bytes.count - 10] ^= 0x40
            try bytes.write(to: URL(fileURLWithPath: facts))
        case 1:
            // The segment touched: its times are not the ones its writer left.
            var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, "\(log)/\(segment)", &times, 0) == 0)
        case 2:
            // A record's byte flipped in place: the walk drops the record, and so must info.
            let handle = try #require(FileHandle(forUpdatingAtPath: "\(log)/\(segment)"))
            try handle.seek(toOffset: 60)
            let byte = try #require(try handle.read(upToCount: 1)?.first)
            try handle.seek(toOffset: 60)
            try handle.write(contentsOf: [byte ^ 0x20])
            try handle.close()
        default:
            // Cut short.
            #expect(truncate(facts, 100) == 0)
        }
        let reopened = try CacheStore(root: store.root)
        #expect(FactsSurvey(reopened.log, inMemorySlots: 0) == nil, "change \(change): not trusted")
        for offset in Self.instants {
            let now = Self.base + offset
            #expect(
                try Self.json(reopened.summary(at: now)) == Self.json(reopened.walkedSummary(at: now)),
                "change \(change) at base + \(offset)")
        }
        Self.listsAsWalk(reopened, facts: true, "change \(change)")
        let found = try reopened.verify(repair: false).findings
        // A damaged record is the segment's finding (its repair replaces the facts too); damaged facts, the
        // facts'; a touched segment none (its facts are not trusted, and nothing is damaged).
        let named = [segment, segment + SegmentFacts.suffix, nil, segment + SegmentFacts.suffix][
            change == 2 ? 0 : change == 1 ? 2 : 1]
        if let named { #expect(found.contains { $0.path.hasSuffix(named) }, "change \(change): \(found)") }
        #expect(
            found.count == (named == nil ? 1 : 2), "change \(change): each finding once, the v4 object's too: \(found)")
        _ = try reopened.verify(repair: true)
        #expect(try reopened.verify(repair: false).findings.isEmpty, "change \(change): one --repair is enough")
        #expect(
            try Self.json(reopened.summary(at: Self.base)) == Self.json(reopened.walkedSummary(at: Self.base)))
    }

    @Test(
        "files opened for each read (a low open-file limit) that a compaction removes meanwhile: no answer, the walk's")
    func removedMeanwhile() throws {
        let store = try unsettledCache()
        let open = try #require(FactsSurvey(store.log, inMemorySlots: 0, keepOpen: true))
        let reopened = try #require(FactsSurvey(store.log, inMemorySlots: 0, keepOpen: false))
        let now = Self.base + 0.5
        #expect(try #require(reopened.counts(at: now)).placements.count == 3)
        _ = try store.log.compact { _, _ in true }
        #expect(reopened.counts(at: now) == nil, "the files it would read are gone: it does not answer")
        // Held open, the removed index and facts still read whole; but a key whose records it must read (two of
        // one millisecond) is in a segment that is gone: no answer either.
        #expect(open.counts(at: now) == nil)
        // Surveyed again, the compacted log answers as the walk does.
        let again = try #require(FactsSurvey(store.log, inMemorySlots: 0, keepOpen: false)?.counts(at: now))
        #expect(again.placements.reduce(0) { $0 + $1.entries } == store.walkedSummary(at: now).flows)
    }

    @Test("a compaction's segments carry facts, and no index or facts outlives its segment")
    func compaction() throws {
        let store = try unsettledCache()
        let log = "\(store.root)/log"
        // An index and facts whose segment a hand removed.
        try Data("x".utf8).write(to: URL(fileURLWithPath: "\(log)/0-0-1.seg.idx"))
        try Data("x".utf8).write(to: URL(fileURLWithPath: "\(log)/0-0-1.seg.facts"))
        _ = try store.log.compact { _, _ in true }
        let names = try FileManager.default.contentsOfDirectory(atPath: log)
        let segments = Set(names.filter { $0.hasSuffix(LogSegment.suffix) })
        #expect(!segments.isEmpty)
        for name in names where name.hasSuffix(LogSegment.indexSuffix) || name.hasSuffix(SegmentFacts.suffix) {
            #expect(segments.contains(String(name.prefix(while: { $0 != "." })) + LogSegment.suffix), "\(name)")
        }
        for segment in segments { #expect(names.contains(segment + SegmentFacts.suffix)) }
        // Written after the compaction: the summary no longer holds, the facts answer.
        let writer = try CacheStore(root: store.root)
        try writer.storeFlow(
            placement: "paywall", identity: Identity(userID: "late"), document: LogDamageTests.flow("v6"),
            ttlSeconds: 60, tier: .network, resolvedAt: Self.base, pointAlias: false)
        writer.finishWriting()
        let reopened = try CacheStore(root: store.root)
        #expect(reopened.restingSummary(at: Self.base + 0.5) == nil)
        #expect(FactsSurvey(reopened.log, inMemorySlots: 0) != nil)
        #expect(
            try Self.json(#require(reopened.factsSummary(at: Self.base + 0.5)))
                == Self.json(reopened.walkedSummary(at: Self.base + 0.5)))
    }

    @Test("docs/cache-format.md states the facts file's layout and bounds as the code has them")
    func documented() throws {
        func grouped(_ n: Int) -> String {
            var (digits, out) = (String(n), "")
            while digits.count > 3 {
                out = "," + digits.suffix(3) + out
                digits.removeLast(3)
            }
            return digits + out
        }
        let section = try #require(DocsTruthTests.text.components(separatedBy: "### Segment facts").dropFirst().first)
            .components(separatedBy: " ### ")[0]
        #expect(SegmentFacts.magic == [0x46, 0x50, 0x46, 0x43, 0x54, 0x00, 0x32, 0x0a])
        for phrase in [
            "`46 50 46 43 54 00 32 0a`", "\(SegmentFacts.slotSize) bytes a record",
            "a header of \(SegmentFacts.headerSize) bytes", "at most \(grouped(FactsSurvey.rangeSlots)) slots",
            "\(grouped(FactsSurvey.inMemorySlots)) records", "more than \(grouped(SegmentFacts.maxTableSize))",
        ] {
            #expect(section.contains(phrase), "the section should say: \(phrase)")
        }
    }
}
