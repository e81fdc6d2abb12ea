import Crypto
import Foundation
import Testing

@testable import FlowPilotCore

/// Cache format 2's log and objects (`FlowLog`), on a real directory: what a
/// lookup finds after writes, rolls, kills, damage and compactions.
@Suite("format-2 log", .serialized)
final class FlowLogTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("flowlog-\(UUID().uuidString)").path

    init() throws { try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true) }
    deinit { try? FileManager.default.removeItem(atPath: root) }

    static let flow = Data(#"{"id":"flow_paywall","screens":[]}"#.utf8)
    static let flowSHA = Digest.sha256Hex(flow)

    static func fingerprint(_ user: String) -> String { Digest.sha256Hex(Data(user.utf8)) }

    static func entry(
        _ user: String, placement: String = "paywall", at millis: Int64 = 1_700_000_000_000, unique: UInt64 = 1,
        sha: String = flowSHA, version: String = "v1"
    ) -> LogRecord {
        LogRecord(
            kind: .entry, tier: .network, resolvedAtMillis: millis, unique: unique, ttlSeconds: 300,
            fingerprint: fingerprint(user), placement: placement, userID: user, flowSHA256: sha,
            flowSize: UInt32(flow.count), contentHash: "sha256:" + String(repeating: "ab", count: 32),
            flowID: "flow_paywall", version: version)
    }

    @Test("hex digits read eight at a time agree with one at a time: every byte value at every place, and at random")
    func hexEightAtOnce() {
        func scalar(_ word: UInt64) -> UInt32? {
            var value: UInt32 = 0
            for n in 0..<8 {
                guard let nibble = LogRecord.nibble(UInt8(truncatingIfNeeded: word >> (8 * n))) else { return nil }
                // Digit 2i is byte i's high half, digit 2i + 1 its low half.
                value |= UInt32(nibble) << (n % 2 == 0 ? 8 * (n / 2) + 4 : 8 * (n / 2))
            }
            return value
        }
        let digits = Array("0123456789abcdef".utf8)
        var generator = SystemRandomNumberGenerator()
        func randomDigits() -> UInt64 {
            (0..<8).reduce(UInt64(0)) { $0 | UInt64(digits.randomElement(using: &generator)!) << (8 * $1) }
        }
        var mismatches: [UInt64] = []
        for _ in 0..<64 {
            let base = randomDigits()
            for place in 0..<8 {
                for byte in 0...255 {
                    let word = base & ~(UInt64(0xFF) << (8 * place)) | UInt64(byte) << (8 * place)
                    if LogRecord.hex8(word) != scalar(word) { mismatches.append(word) }
                }
            }
        }
        for _ in 0..<100_000 {
            for word in [randomDigits(), UInt64.random(in: 0 ... .max, using: &generator)]
            where LogRecord.hex8(word) != scalar(word) {
                mismatches.append(word)
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5).map { String($0, radix: 16) })")
        // Whole digests: 64 digits to their 32 bytes, and back.
        for n in 0..<200 {
            let digest = Digest.sha256Hex(Data("\(n)".utf8))
            #expect(LogRecord.rawHex(Substring(digest)).map(Digest.hex) == digest)
            #expect(LogRecord.rawHex(Substring(digest.uppercased())) == nil, "lowercase only")
        }
        #expect(LogRecord.rawHex(Substring(String(repeating: "0", count: 63) + "g")) == nil)
    }

    @Test("a record reads back as written, fields of any length whole")
    func roundTrip() throws {
        let long = String(repeating: "ü", count: 5000)
        var records = [Self.entry("alice"), Self.entry(long, placement: long, version: long)]
        records[1].contentHash = "md5:not-a-sha"
        records.append(
            LogRecord(
                kind: .alias, tier: .network, resolvedAtMillis: 5, unique: 9, ttlSeconds: 0,
                fingerprint: Self.fingerprint("bob"), placement: "paywall", userID: "bob"))
        // "sha256:" and digits that are not 64 lowercase hex ones: kept as the string, not half decoded.
        for odd in [
            "sha256:" + String(repeating: "AB", count: 32), "sha256:" + String(repeating: "ab", count: 31) + "zz",
        ] {
            var record = Self.entry("carol")
            record.contentHash = odd
            records.append(record)
        }
        var bytes: [UInt8] = LogSegment.magic
        for record in records { record.encode(into: &bytes) }
        let decoded = bytes.withUnsafeBytes { LogSegment.records(in: $0) }
        #expect(decoded.problem == nil)
        #expect(decoded.records.map(\.record) == records)
        // Indexing an unsealed tail reads each record's key alone: the same keys, at the same offsets.
        let keys = bytes.withUnsafeBytes { LogRecord.keyPrefixes($0, from: LogSegment.magic.count) }
        #expect(keys.keys.map(\.prefix) == records.map(\.key.prefix))
        #expect(keys.keys.map(\.offset) == decoded.records.map(\.offset))
        #expect(keys.end == bytes.count)
        // About 200 bytes an entry with the usual fields: the cost format 2 promises.
        var one: [UInt8] = []
        Self.entry("user-000123").encode(into: &one)
        #expect(one.count < 200, "an entry's record is \(one.count) bytes")
    }

    @Test("a torn or damaged record ends what is read of its segment, never read as a record")
    func tornAndCorrupt() {
        var bytes: [UInt8] = LogSegment.magic
        Self.entry("alice").encode(into: &bytes)
        let whole = bytes.count
        Self.entry("bob").encode(into: &bytes)
        for cut in (whole + 1)..<bytes.count {
            let read = Array(bytes.prefix(cut)).withUnsafeBytes { LogSegment.records(in: $0) }
            #expect(read.records.map(\.record.userID) == ["alice"], "cut at \(cut)")
            #expect(read.problem != nil)
            let keys = Array(bytes.prefix(cut)).withUnsafeBytes {
                LogRecord.keyPrefixes($0, from: LogSegment.magic.count)
            }
            #expect(keys.keys.count == 1 && keys.end == whole, "cut at \(cut): the key scan stops where the read does")
        }
        for flip in whole..<bytes.count {
            var damaged = bytes
            damaged[flip] ^= 0x40
            let read = damaged.withUnsafeBytes { LogSegment.records(in: $0) }
            #expect(read.records.map(\.record.userID) == ["alice"], "byte \(flip) flipped")
            let keys = damaged.withUnsafeBytes { LogRecord.keyPrefixes($0, from: LogSegment.magic.count) }
            #expect(keys.keys.count == 1, "byte \(flip) flipped: the key scan indexes only the whole record")
        }
        // Zeroes where a file system extended the file and the bytes never came.
        let zeroed = bytes.prefix(whole) + [UInt8](repeating: 0, count: 300)
        let read = Array(zeroed).withUnsafeBytes { LogSegment.records(in: $0) }
        #expect(read.records.count == 1 && read.problem?.contains("zeroed") == true)
    }

    @Test("a record whose strings are not UTF-8 is damage, wherever in a string the bad byte is")
    func notUTF8() throws {
        // Long enough that the bad byte comes after whole 8-byte words of ASCII, or within the first.
        for (user, bad) in [("bob", 1), ("user-0123456789abcdef", 17), ("user-0123456789abcdef", 2)] {
            var bytes: [UInt8] = LogSegment.magic
            Self.entry("alice").encode(into: &bytes)
            let start = bytes.count
            Self.entry(user).encode(into: &bytes)
            // The user id's bytes, found by their text, made a lone continuation byte; the CRC made right.
            let userBytes = Array(user.utf8)
            let at = try #require(
                (start..<(bytes.count - userBytes.count)).first {
                    Array(bytes[$0..<($0 + userBytes.count)]) == userBytes
                })
            bytes[at + bad] = 0x80
            let body = Array(bytes[(start + LogRecord.headerSize)...])
            let crc = body.withUnsafeBytes { LogRecord.crc($0) }
            LogRecord.store(UInt64(crc), 4, at: start + 4, in: &bytes)
            let read = bytes.withUnsafeBytes { LogSegment.records(in: $0) }
            #expect(read.records.map(\.record.userID) == ["alice"], "\(user), byte \(bad)")
            #expect(read.problem?.contains("does not parse") == true, "\(user), byte \(bad): \(read.problem ?? "none")")
        }
    }

    @Test("the newest record of a key wins, whatever writer wrote it and in what order")
    func newestWins() throws {
        let log = FlowLog(root: root)
        try log.storeObject(Self.flow, sha256: Self.flowSHA)
        let first = FlowLog.Writer(log: log)
        let second = FlowLog.Writer(log: log)
        try second.append([Self.entry("alice", at: 2000, version: "new")])
        try first.append([Self.entry("alice", at: 1000, version: "old"), Self.entry("bob", at: 1000)])
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("alice"))?.0.version == "new")
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("bob")) != nil)
        #expect(log.newestEntry(placement: "onboarding", fingerprint: Self.fingerprint("bob")) == nil)
        // Same millisecond: the unique part orders them.
        try first.append([Self.entry("alice", at: 2000, unique: 7, version: "newer")])
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("alice"))?.0.version == "newer")
    }

    @Test("a writer's appends are indexed for its own lookups as written, beside another process's read from the file")
    func ownAppendsIndexed() throws {
        let log = FlowLog(root: root)
        try log.storeObject(Self.flow, sha256: Self.flowSHA)
        let mine = FlowLog.Writer(log: log)
        try mine.append([Self.entry("u0")])
        // The view lists the segment and reads it: from here on this writer's appends are handed to it.
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("u0")) != nil)
        // Another process's writer: its segment is read from the file, as it grows.
        let otherLog = FlowLog(root: root)
        let theirs = FlowLog.Writer(log: otherLog)
        for n in 1...50 {
            try mine.append([
                Self.entry("u\(n)", at: 1_700_000_000_000 + Int64(n)), Self.entry("u\(n)", placement: "onboarding"),
            ])
            try theirs.append([Self.entry("t\(n)")])
            if n % 10 == 0 { try mine.append([Self.entry("u\(n - 5)", at: 1_750_000_000_000, version: "again")]) }
        }
        for n in 0...50 {
            let found = log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("u\(n)"))
            #expect(found?.0.version == (n % 10 == 5 && n < 50 ? "again" : "v1"), "u\(n)")
            if n > 0 {
                #expect(log.newestEntry(placement: "onboarding", fingerprint: Self.fingerprint("u\(n)")) != nil)
                #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("t\(n)")) != nil, "t\(n)")
                #expect(otherLog.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("u\(n)")) != nil)
            }
        }
        // Each record of a key is found once: none is indexed twice (by the hand-off and by a read).
        #expect(log.records(of: .entry(placement: "paywall", fingerprint: Self.fingerprint("u5"))).count == 2)
        #expect(log.records(of: .entry(placement: "paywall", fingerprint: Self.fingerprint("u7"))).count == 1)
        // This process's lookups take what its writer appended from the writer, not from the file (no `fstat` of
        // the segment at a lookup): a record put in the file behind the writer's back is seen by the other
        // process's view, which reads the file, and not by this one.
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: "\(root)/log").first {
                $0.hasPrefix(mine.writerID) && $0.hasSuffix(LogSegment.suffix)
            })
        let (bytes, _) = FlowLog.Writer.encode([Self.entry("behind")])
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(root)/log/\(segment)"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
        #expect(otherLog.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("behind")) != nil)
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("behind")) == nil)
    }

    @Test("a lookup reads sealed segments through their indexes and unsealed ones whole, finding every key")
    func rollsAndIndexes() throws {
        let log = FlowLog(root: root, rollBytes: 4096)
        try log.storeObject(Self.flow, sha256: Self.flowSHA)
        let writer = FlowLog.Writer(log: log)
        for batch in 0..<20 {
            try writer.append((0..<10).map { Self.entry("user-\(batch * 10 + $0)") })
        }
        let segments = log.segments()
        #expect(segments.count > 5)
        #expect(segments.dropLast().allSatisfy { $0.index != nil }, "every full segment is sealed")
        #expect(segments.last?.index == nil, "the one being written is not")
        for user in 0..<200 {
            let found = log.records(of: .entry(placement: "paywall", fingerprint: Self.fingerprint("user-\(user)")))
            #expect(found.count == 1, "user-\(user)")
        }
        try writer.close()
        #expect(log.segments().allSatisfy { $0.index != nil })
        #expect(log.records(of: .entry(placement: "paywall", fingerprint: Self.fingerprint("user-199"))).count == 1)
        // A damaged index costs its records (a miss), never a wrong answer.
        let index = try #require(log.segments().first?.index)
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: index)))
        #expect(SegmentIndex.check(bytes) != nil)
        for i in SegmentIndex.headerSize..<(SegmentIndex.headerSize + SegmentIndex.fanoutSize) { bytes[i] = 0xFF }
        try Data(bytes).write(to: URL(fileURLWithPath: index))
        #expect(SegmentIndex.check(bytes) == nil, "verify sees the damage")
        for user in 0..<200 {
            for record in log.records(of: .entry(placement: "paywall", fingerprint: Self.fingerprint("user-\(user)"))) {
                #expect(record.userID == "user-\(user)")
            }
        }
    }

    @Test("a record whose flow is missing or damaged is passed over for the older one")
    func missingObject() throws {
        let log = FlowLog(root: root)
        try log.storeObject(Self.flow, sha256: Self.flowSHA)
        let other = Data(#"{"id":"flow_paywall","screens":[{}]}"#.utf8)
        let otherSHA = Digest.sha256Hex(other)
        let writer = FlowLog.Writer(log: log)
        try writer.append([Self.entry("alice", at: 1000, version: "old")])
        try writer.append([Self.entry("alice", at: 2000, sha: otherSHA, version: "new")])
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("alice"))?.0.version == "old")
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: log.objectPath(otherSHA)))
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("alice"))?.0.version == "old")
        try FileManager.default.removeItem(atPath: log.objectPath(otherSHA))
        try log.storeObject(other, sha256: otherSHA)
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("alice"))?.0.version == "new")
    }

    @Test("compaction keeps the newest record of each kept key, drops the rest, and its writers start anew")
    func compaction() throws {
        let log = FlowLog(root: root, rollBytes: 2048)
        try log.storeObject(Self.flow, sha256: Self.flowSHA)
        let unused = Data(#"{"id":"unused"}"#.utf8)
        try log.storeObject(unused, sha256: Digest.sha256Hex(unused))
        let writer = FlowLog.Writer(log: log)
        for round in 0..<3 {
            try writer.append((0..<30).map { Self.entry("user-\($0)", at: Int64(1000 + round)) })
        }
        try writer.append([
            LogRecord(
                kind: .alias, tier: .network, resolvedAtMillis: 1002, unique: 1, ttlSeconds: 0,
                fingerprint: Self.fingerprint("user-3"), placement: "paywall", userID: "user-3"),
            LogRecord(
                kind: .alias, tier: .network, resolvedAtMillis: 1003, unique: 1, ttlSeconds: 0,
                fingerprint: Self.fingerprint("user-4"), placement: "paywall", userID: "user-4"),
        ])
        let before = log.segments().count
        // Clearing one identity: its entries, and the alias pointing at it.
        let result = try log.compact { record, _ in record.userID != "user-4" }
        #expect(result.segmentsRead == before)
        #expect(result.recordsKept == 29 + 0)
        #expect(result.objectsRemoved == 1)
        #expect(log.segments().allSatisfy { $0.index != nil })
        #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("user-4")) == nil)
        #expect(log.newestAlias(placement: "paywall") == nil, "the alias pointed at the cleared identity")
        #expect(
            log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("user-5"))?.0.resolvedAtMillis == 1002)
        var total = 0
        _ = log.scan { _, _, _, _, _ in total += 1 }
        #expect(total == 29)
        // The writer's segment went with the compaction: its next append starts a new one, not lost.
        try writer.append([Self.entry("user-4", at: 5000)])
        #expect(
            log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("user-4"))?.0.resolvedAtMillis == 5000)
    }

    @Test("a lookup beside a compaction finds the key in the old segments or the new, never neither")
    func lookupBesideCompaction() throws {
        let log = FlowLog(root: root, rollBytes: 1024)
        try log.storeObject(Self.flow, sha256: Self.flowSHA)
        let writer = FlowLog.Writer(log: log)
        try writer.append((0..<100).map { Self.entry("user-\($0)") })
        try writer.close()
        // The reader lists the segments, then a compaction replaces every one of them, then the reader reads.
        let stale = log.segments()
        _ = try log.compact { _, _ in true }
        #expect(Set(stale.map(\.name)).isDisjoint(with: log.segments().map(\.name)))
        let key = LogKey.entry(placement: "paywall", fingerprint: Self.fingerprint("user-50"))
        #expect(throws: FlowLog.Vanished.self) { try log.records(of: key, in: stale) }
        for user in [0, 50, 99] {
            #expect(log.newestEntry(placement: "paywall", fingerprint: Self.fingerprint("user-\(user)")) != nil)
        }
    }

    @Test(
        "an entry key made again (from the memo of recent keys) has the prefix its SHA-256 gives, keys sharing a slot too"
    )
    func keyPrefixMemo() {
        func expected(_ placement: String, _ fingerprint: String) -> UInt64 {
            // docs/cache-format.md: SHA-256(kind 1, placement, 0, the fingerprint's hex digits), first 8 bytes big endian.
            let digest = SHA256.hash(data: [1] + Array(placement.utf8) + [0] + Array(fingerprint.utf8))
            return digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
        }
        // Fingerprints alike in their first digits and placements of one length share slots.
        let fingerprints = (0..<300).map { "abc" + String(Self.fingerprint("u\($0)").dropFirst(3)) }
        let placements = ["paywall", "walpay_", String(repeating: "p", count: 7), "onboarding"]
        for round in 0..<3 {
            for fingerprint in fingerprints {
                for placement in placements {
                    let key = LogKey.entry(placement: placement, fingerprint: fingerprint)
                    #expect(key.prefix == expected(placement, fingerprint), "round \(round)")
                }
            }
        }
    }
}
