import Foundation
import Testing

@testable import FlowPilotCore

/// Damage to a format-2 cache costs what it hit, and no more (#62): a
/// damaged index means a scan of its segment, a damaged record costs that
/// record (reading goes on after it), a damaged flow object sends lookups to
/// the key's older good record, and `list`, lookups, `verify` and every
/// compaction agree on which record that is.
@Suite("format-2 damage")
final class LogDamageTests {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("damage-\(UUID().uuidString)").path

    deinit { try? FileManager.default.removeItem(atPath: scratch) }

    static func flow(_ version: String) -> FlowDocument {
        let json: JSONValue = .object([
            "schema_version": .number(1), "id": .string("flow_paywall"), "version": .string(version),
            "screens": .array([.object(["id": .string("s"), "components": .array([])])]),
        ])
        return FlowDocument.validate(json, location: "test").0!
    }

    static func user(_ n: Int) -> Identity { Identity(userID: "user-\(n)") }

    /// A cache whose users `0..<older` got flow version "old" from one
    /// writer, then users `0..<newer` got "new" from a second: two sealed
    /// segments, the newer's records the ones to serve.
    func twoWriters(older: Int = 300, newer: Int = 100) throws -> (
        root: String, old: FlowLog.Segment?, new: FlowLog.Segment
    ) {
        let root = "\(scratch)/\(UUID().uuidString)"
        let first = try CacheStore(root: root, create: true, newFormat: 2)
        let then = Date() - 60
        for n in 0..<older {
            try first.storeFlow(
                placement: "paywall", identity: Self.user(n), document: Self.flow("old"), ttlSeconds: 300,
                tier: .network, resolvedAt: then, pointAlias: false)
        }
        first.finishWriting()
        let before = Set(first.log.segments().map(\.name))
        let second = try CacheStore(root: root)
        for n in 0..<newer {
            try second.storeFlow(
                placement: "paywall", identity: Self.user(n), document: Self.flow("new"), ttlSeconds: 300,
                tier: .network, pointAlias: false)
        }
        second.finishWriting()
        let segments = second.log.segments()
        #expect(segments.count == (older > 0 ? 2 : 1) && segments.allSatisfy { $0.index != nil }, "sealed segments")
        let old = segments.first { before.contains($0.name) }
        let new = try #require(segments.first { !before.contains($0.name) })
        return (root, old, new)
    }

    /// What a fresh process sees for user `n`: the lookup's version and `list`'s.
    func seen(_ root: String, _ n: Int) throws -> (lookup: String?, listed: String?) {
        let store = try CacheStore(root: root)
        let fingerprint = Self.user(n).fingerprint
        return (
            store.lookupFlow(placement: "paywall", identity: Self.user(n))?.1.version,
            store.scan().flows.first { $0.fingerprint == fingerprint }?.version
        )
    }

    func rewrite(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        change(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test("a newer segment's index cut to half: lookups scan the segment and serve the newest, as list says")
    func truncatedIndex() throws {
        let (root, _, new) = try twoWriters()
        try rewrite(try #require(new.index)) { $0.removeLast($0.count / 2) }
        for n in [0, 50, 80, 99] {
            let seen = try seen(root, n)
            #expect(seen.lookup == "new" && seen.listed == "new", "user-\(n): \(seen)")
        }
        #expect(try seen(root, 150) == ("old", "old"))
        let findings = try CacheStore(root: root).verify(repair: false).findings
        #expect(findings.map(\.rule) == ["cache-corrupt-segment"], "\(findings.map(\.line))")
    }

    @Test("4 KiB of an older index zeroed: every key it holds is still found, none sent to the alias")
    func zeroedIndexPage() throws {
        let (root, old, _) = try twoWriters()
        try rewrite(try #require(old?.index)) { bytes in
            // The keys and offsets after the fanout: a page of them reads as key 0, offset 0.
            let entries = SegmentIndex.headerSize + SegmentIndex.fanoutSize
            for i in entries..<min(bytes.count - 4, entries + 4096) { bytes[i] = 0 }
        }
        let store = try CacheStore(root: root)
        for n in 0..<300 {
            #expect(
                store.lookupFlow(placement: "paywall", identity: Self.user(n))?.1.version == (n < 100 ? "new" : "old"),
                "user-\(n)")
        }
    }

    @Test("a newest flow object damaged: lookups and list serve the older good record, and so does a prune")
    func damagedObjectKeepsOlderRecord() throws {
        let (root, _, _) = try twoWriters()
        let newSHA = Digest.sha256Hex(Self.flow("new").canonical.data)
        try rewrite("\(root)/objects/\(newSHA)") { $0[$0.count / 2] ^= 0x01 }
        for n in [0, 42, 99] { #expect(try seen(root, n) == ("old", "old"), "user-\(n) before the prune") }
        let pruned = try CacheStore(root: root).prune(CacheStore.PruneOptions())
        #expect(pruned.failed.isEmpty)
        for n in [0, 42, 99, 250] { #expect(try seen(root, n) == ("old", "old"), "user-\(n) after the prune") }
        #expect(try CacheStore(root: root).verify(repair: false).findings.isEmpty, "nothing broken is left")
    }

    @Test("verify --repair of a damaged newest flow finishes in one run and keeps what a lookup served")
    func repairInOneRun() throws {
        let (root, _, _) = try twoWriters()
        let newSHA = Digest.sha256Hex(Self.flow("new").canonical.data)
        try rewrite("\(root)/objects/\(newSHA)") { $0[$0.count / 2] ^= 0x01 }
        let found = try CacheStore(root: root).verify(repair: true)
        #expect(found.findings.map(\.rule) == ["cache-corrupt-entry"], "the object: \(found.findings.map(\.line))")
        #expect(found.notRemoved.isEmpty)
        #expect(try CacheStore(root: root).verify(repair: false).findings.isEmpty, "one run was enough")
        for n in [0, 99, 299] { #expect(try seen(root, n) == ("old", "old"), "user-\(n)") }
    }

    @Test("one flipped byte costs its record: list, lookups and verify read on after it and agree")
    func flippedRecordCostsItself() throws {
        let (root, _, new) = try twoWriters(older: 0, newer: 120)
        // The 11th record of the newer segment (each record of these is the same length).
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: new.path)))
        let first = LogSegment.magic.count
        let length = bytes.withUnsafeBytes { LogRecord.headerSize + Int(LogRecord.load($0, first, 4)) }
        let damagedAt = first + 10 * length
        try rewrite(new.path) { $0[damagedAt + 30] ^= 0x20 }
        let store = try CacheStore(root: root)
        let listed = Set(store.scan().flows.map(\.userID))
        let served = Set((0..<120).filter { store.lookupFlow(placement: "paywall", identity: Self.user($0)) != nil })
        #expect(listed.count == 119 && served.count == 119, "listed \(listed.count), served \(served.count)")
        #expect(Set(served.map { "user-\($0)" }) == listed, "lookups and list agree")
        let findings = try store.verify(repair: false).findings
        #expect(findings.map(\.rule) == ["cache-corrupt-segment"])
        #expect(findings.first?.message.contains("1 record lost") == true, "\(findings.map(\.line))")
        // The repair keeps every record that still reads whole.
        #expect(try CacheStore(root: root).verify(repair: true).notRemoved.isEmpty)
        let repaired = try CacheStore(root: root)
        #expect(try repaired.verify(repair: false).findings.isEmpty)
        #expect(repaired.scan().flows.count == 119)
    }

    @Test("the same in a segment being written: its unsealed tail is read on past the damage")
    func flippedRecordInUnsealedSegment() throws {
        let root = "\(scratch)/\(UUID().uuidString)"
        let writer = try CacheStore(root: root, create: true, newFormat: 2)
        for n in 0..<20 {
            try writer.storeFlow(
                placement: "paywall", identity: Self.user(n), document: Self.flow("v"), ttlSeconds: 300,
                tier: .network, pointAlias: false)
        }
        let segment = try #require(writer.log.segments().first)
        #expect(segment.index == nil)
        try rewrite(segment.path) { $0[LogSegment.magic.count + 40] ^= 0x01 }
        let reader = try CacheStore(root: root)
        let served = (0..<20).filter { reader.lookupFlow(placement: "paywall", identity: Self.user($0)) != nil }
        #expect(served == Array(1..<20))
        #expect(reader.scan().flows.count == 19)
    }

    @Test("a sealed segment cut short is damage that names what it lost, not a killed writer's debris")
    func truncatedSealedSegment() throws {
        let (root, _, new) = try twoWriters(older: 0, newer: 50)
        try rewrite(new.path) { $0.removeLast($0.count / 2 + 7) }
        let store = try CacheStore(root: root)
        let findings = try store.verify(repair: false).findings
        #expect(findings.map(\.rule) == ["cache-corrupt-segment"], "\(findings.map(\.line))")
        let message = findings.first?.message ?? ""
        #expect(message.contains("cut short") && message.contains("records lost"), "\(message)")
        let kept = store.scan().flows.count
        #expect(kept > 0 && kept < 50)
        let served = (0..<50).filter { store.lookupFlow(placement: "paywall", identity: Self.user($0)) != nil }
        #expect(served.count == kept, "lookups and list agree")
    }

    @Test("an empty marker beside the cache's folders is damage, answered at once; --repair writes it again")
    func emptyMarker() throws {
        let (root, _, _) = try twoWriters(older: 3, newer: 1)
        try Data().write(to: URL(fileURLWithPath: "\(root)/fpcache.json"))
        // Without the check this waited CacheStore.markerWait (60 s), then said "not a cache yet".
        #expect {
            _ = try CacheStore(root: root)
        } throws: { error in
            guard case FPError.invalid(let findings) = error else { return false }
            return findings.map(\.rule) == ["cache-corrupt-marker"]
                && findings[0].message.contains("empty") && findings[0].message.contains("--repair")
        }
        let damage = try #require(CacheStore.damagedMarker(root: root))
        #expect(damage.version == 2, "log/ and objects/ say format 2")
        #expect(try CacheStore.mendMarker(root: root)?.rule == "cache-corrupt-marker")
        let mended = try CacheStore(root: root)
        #expect(mended.version == 2)
        #expect(mended.lookupFlow(placement: "paywall", identity: Self.user(0))?.1.version == "new")
        #expect(CacheStore.damagedMarker(root: root) == nil)
    }
}
