import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import FlowPilotCore

private let flowJSON = #"{"schema_version":1,"id":"f","version":"v1","screens":[{"id":"a","components":[]}]}"#
private let document = FlowDocument.validate(data: Data(flowJSON.utf8), location: "f").0

@Suite("what keeps a warm near the disk's write floor")
struct WarmSpeedPartsTests {
    final class Scratch {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fpctl-speed-\(UUID().uuidString)")
            .path
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    @Test("aliases: the first entry of a placement at once, later ones coalesced, flush points at the newest")
    func aliasWriter() throws {
        let scratch = Scratch()
        let store = try CacheStore(root: scratch.path, create: true)
        let doc = try #require(document)
        let writer = AliasWriter(store: store, interval: .seconds(3600))
        let start = Date(timeIntervalSince1970: 2_000_000_000)
        func put(_ user: String, _ offset: TimeInterval) throws {
            let entry = try store.storeFlow(
                placement: "p", identity: Identity(userID: user), document: doc, ttlSeconds: 60, tier: .network,
                resolvedAt: start.addingTimeInterval(offset), pointAlias: false)
            writer.stored(entry)
        }
        try put("first", 0)
        writer.settle()
        #expect(store.lookupAlias(placement: "p")?.0.userID == "first", "the first entry gets its alias at once")
        try put("second", 1)
        try put("third", 2)
        writer.settle()
        #expect(store.lookupAlias(placement: "p")?.0.userID == "first", "later ones wait for the interval or a flush")
        writer.flush()
        #expect(store.lookupAlias(placement: "p")?.0.userID == "third", "flush points at the newest")
        #expect(try store.verify(repair: false, now: start).findings.isEmpty)
        // Many placements (past those looked through in turn, into the writer's table), two
        // spellings of one text among them: each its own, each gets its first alias, then its newest.
        let names = (0..<20).map { "p\($0)" } + ["caf\u{E9}", "cafe\u{301}"]
        func many(_ user: String, _ offset: TimeInterval) throws {
            for name in names {
                writer.stored(
                    try store.storeFlow(
                        placement: name, identity: Identity(userID: user), document: doc, ttlSeconds: 60,
                        tier: .network, resolvedAt: start.addingTimeInterval(offset), pointAlias: false))
            }
        }
        try many("one", 10)
        writer.settle()
        #expect(names.allSatisfy { store.lookupAlias(placement: $0)?.0.userID == "one" })
        try many("two", 11)
        writer.flush()
        #expect(names.allSatisfy { store.lookupAlias(placement: $0)?.0.userID == "two" })
    }

    @Test("an alias is written on the alias writer's queue, never on the thread that stored its entry (the commit's)")
    func aliasWriterThread() throws {
        let doc = try #require(document)
        let writes = Mutex<[(user: String?, thread: UInt)]>([])
        // The first write is held until the caller has gone on: it cannot be on the caller's thread (a writer
        // that wrote there would hold the caller 5 s, then fail the checks below, not hang).
        let release = DispatchSemaphore(value: 0)
        let writer = AliasWriter(interval: .zero) { entry in
            if entry.userID == "u0" { _ = release.wait(timeout: .now() + 5) }
            writes.withLock { $0.append((entry.userID, UInt(pthread_self()))) }
        }
        let caller = UInt(pthread_self())
        for n in 0..<3 {
            writer.stored(
                CachedFlow(
                    placement: "p", fingerprint: String(repeating: "0", count: 64), userID: "u\(n)", flowID: doc.id,
                    version: doc.version, resolvedAt: Date(timeIntervalSince1970: Double(1_000 + n)), ttlSeconds: 60,
                    size: 1, path: "x"))
        }
        #expect(writes.withLock { $0.isEmpty }, "stored returned before any alias was written")
        release.signal()
        writer.flush()
        let done = writes.withLock { $0 }
        #expect(done.map(\.user) == ["u0", "u1", "u2"], "in the order stored")
        #expect(done.allSatisfy { $0.thread != caller })
    }

    @Test("a flow whose bytes equal those of one validated before is reused; other bytes are parsed and validated")
    func flowMemo() throws {
        let memo = FlowMemo()
        let base: JSONValue = .object([
            "schema_version": .number(1), "id": .string("f"), "version": .string("v"),
            "screens": .array([.object(["id": .string("a"), "components": .array([])])]),
        ])
        guard case .object(var members) = base else { return }
        members["content_hash"] = .string(FlowDocument.computeContentHash(base))
        let valid = CanonicalJSON.data(.object(members))
        func validate(_ data: Data, _ location: String) -> (FlowDocument?, [Finding]) {
            data.withUnsafeBytes { memo.validate(bytes: $0, location: location) }
        }
        let (first, _) = validate(valid, "a")
        let (again, findings) = validate(valid, "b")
        #expect(first != nil && again != nil && findings.isEmpty)
        #expect(first?.encoded === again?.encoded, "the same document, encoded once")
        members["id"] = .string("changed")  // the declared hash no longer matches
        let (tampered, problems) = validate(CanonicalJSON.data(.object(members)), "c")
        #expect(tampered == nil && problems.contains { $0.rule == "flow-content-hash" })
        // The same flow with other spacing: other bytes, parsed and validated, a document of its own.
        let spaced = Data(String(decoding: valid, as: UTF8.self).replacingOccurrences(of: ",", with: ", ").utf8)
        let (respaced, none) = validate(spaced, "d")
        #expect(respaced != nil && none.isEmpty && respaced?.encoded !== first?.encoded)
        #expect(respaced?.canonical.data == first?.canonical.data, "one canonical form whatever the spacing")
        let (broken, brokenFindings) = validate(Data(#"{"id":"f","#.utf8), "e")
        #expect(broken == nil && brokenFindings.first?.rule == "flow-json")
    }

    @Test(
        "flows alike in length and at both ends are told apart by all their bytes, and a run of them never makes a long chain"
    )
    func flowMemoProbe() throws {
        let memo = FlowMemo()
        func validate(_ data: Data) -> (FlowDocument?, [Finding]) {
            data.withUnsafeBytes { memo.validate(bytes: $0, location: "x") }
        }
        // A long id at the start and a long version at the end: what differs is in the middle.
        func flow(_ screen: String, hash: Bool) -> Data {
            let doc: JSONValue = .object([
                "schema_version": .number(1), "id": .string(String(repeating: "f", count: 80)),
                "version": .string(String(repeating: "v", count: 80)),
                "screens": .array([.object(["id": .string(screen), "components": .array([])])]),
            ])
            guard hash, case .object(var members) = doc else { return CanonicalJSON.data(doc) }
            members["content_hash"] = .string(FlowDocument.computeContentHash(doc))
            return CanonicalJSON.data(.object(members))
        }
        let valid = flow("a", hash: true)
        var tampered = valid
        let at = try #require(valid.firstRange(of: Data(#"{"components":[],"id":"a"}"#.utf8))).upperBound - 3
        #expect(at > 64 && at < valid.count - 64, "the changed byte is outside the probe's bytes")
        tampered[at] = UInt8(ascii: "b")  // the same length, the same ends, the declared hash no longer matches
        #expect(validate(valid).0 != nil)
        let (reused, findings) = validate(tampered)
        #expect(reused == nil && findings.contains { $0.rule == "flow-content-hash" }, "\(findings)")
        // Ten valid flows alike at both ends: each its own document; only FlowMemo.perProbe of them kept.
        let alike = (0..<10).map { flow("s\($0)", hash: false) }
        let documents = alike.map { validate($0).0 }
        #expect(documents.allSatisfy { $0 != nil })
        #expect(Set(documents.compactMap { $0?.canonical.data }).count == 10)
        #expect(memo.count == 1 + FlowMemo.perProbe, "one probe's chain is bounded")
        #expect(
            validate(alike[9]).0?.canonical.data == CanonicalJSON.data(try JSONParser.parse(alike[9])),
            "a flow past the bound is still validated, as itself")
    }

    @Test("an answer is read in one pass: members parsed, each flow kept as its bytes, errors where parse finds them")
    func answerKeepsFlowBytes() throws {
        let text =
            #"{"results":[{"placement_key":"a","flow":{"id":"x","s":"}]\"{"},"cache_ttl_seconds":60},"#
            + #"{"placement_key":"b","flow":null},{"placement_key":"c","error":{"code":"e"}},7]}"#
        let answer = try Data(text.utf8).withUnsafeBytes {
            try JSONParser.parseKeepingRaw(bytes: $0, member: "flow", nested: "results")
        }
        let items = try #require(answer.items)
        #expect(items.count == 4 && answer.members.isEmpty)
        let bytes = Array(text.utf8)
        func raw(_ item: JSONObjectRaw) -> String? { item.raw.map { String(decoding: bytes[$0], as: UTF8.self) } }
        #expect(raw(items[0]) == #"{"id":"x","s":"}]\"{"}"#, "brackets and quotes inside strings do not end the flow")
        #expect(items[0].members["cache_ttl_seconds"] == .number(60) && items[0].members["flow"] == nil)
        #expect(raw(items[1]) == "null" && raw(items[2]) == nil && items[2].members["error"]?["code"] == .string("e"))
        #expect(items[3].other == .number(7))
        let many = #"{"results":[{"# + (0..<40).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}]}"
        let wide = try Data(many.utf8).withUnsafeBytes {
            try JSONParser.parseKeepingRaw(bytes: $0, member: "flow", nested: "results")
        }
        #expect(wide.items?.first?.members.count == 40 && wide.items?.first?.members["k39"] == .number(39))
        for bad in [
            #"{"results":[{"flow":{"id":"x"}]}"#, #"{"results":[{"flow":{"id":"x}}]}"#,
            #"{"results":[{"flow":1,"flow":2}]}"#, #"{"results":[]} x"#,
            // A duplicate among many members (past the 16 compared one by one) too.
            #"{"results":[{"# + (0..<20).map { #""k\#($0)":\#($0),"# }.joined() + #""k3":0}]}"#,
        ] {
            #expect(throws: JSONValue.ParseError.self, "\(bad)") {
                try Data(bad.utf8).withUnsafeBytes {
                    try JSONParser.parseKeepingRaw(bytes: $0, member: "flow", nested: "results")
                }
            }
        }
    }

    /// A `KnownValues` holding fixed bytes, each with the nesting it claims.
    struct Fixed: KnownValues {
        let values: [(bytes: [UInt8], nesting: Int)]
        func prefix(of bytes: UnsafeRawBufferPointer) -> (length: Int, nesting: Int)? {
            values.first { bytes.starts(with: $0.bytes) }.map { ($0.bytes.count, $0.nesting) }
        }
    }

    @Test(
        "a flow the memo holds is taken by its length, not passed over byte by byte: the same ranges and members, and depth still refused"
    )
    func knownFlowExtent() throws {
        let flow = #"{"id":"x","s":"}]\"{","screens":[[{"a":[]}]]}"#
        let text =
            #"{"results":[{"cache_ttl_seconds":60,"flow":"# + flow + #","placement_key":"a"},"#
            + #"{"flow":"# + flow + #"},{"flow":{"id":"y"},"placement_key":"b"}]}"#
        func parse(_ known: (any KnownValues)?) throws -> JSONObjectRaw {
            try Data(text.utf8).withUnsafeBytes {
                try JSONParser.parseKeepingRaw(bytes: $0, member: "flow", nested: "results", known: known)
            }
        }
        let nesting = try #require(Data(flow.utf8).withUnsafeBytes { JSONParser.nesting(of: $0) })
        #expect(nesting == 5, "brackets inside strings are not counted")
        let plain = try #require(try parse(nil).items)
        let memo = FlowMemo()
        let validFlow = try #require(Self.validFlow)
        _ = validFlow.withUnsafeBytes { memo.validate(bytes: $0, location: "a") }
        for known in [Fixed(values: [(Array(flow.utf8), nesting)]) as any KnownValues, memo] {
            let items = try #require(try parse(known).items)
            #expect(items.map(\.raw) == plain.map(\.raw) && items.map(\.members) == plain.map(\.members))
        }
        // The memo names a flow it validated that an answer goes on with, and nothing else.
        let answer = validFlow + Data(#","placement_key":"a"}"#.utf8)
        #expect(answer.withUnsafeBytes { memo.prefix(of: $0) }?.length == validFlow.count)
        #expect(validFlow.dropLast().withUnsafeBytes { memo.prefix(of: $0) } == nil, "a flow cut short is not it")
        #expect(Data(flow.utf8).withUnsafeBytes { memo.prefix(of: $0) } == nil)
        // Known bytes nested deeper than the answer allows at that depth are refused as skipping them is.
        let tower =
            String(repeating: "[", count: JSONParser.maxDepth - 2)
            + String(repeating: "]", count: JSONParser.maxDepth - 2)
        let towerNesting = try #require(Data(tower.utf8).withUnsafeBytes { JSONParser.nesting(of: $0) })
        #expect(towerNesting == JSONParser.maxDepth - 2, "alone, at depth 0, it passes")
        #expect(throws: JSONValue.ParseError.self, "three levels down it is too deep, known or not") {
            try Data((#"{"results":[{"flow":"# + tower + "}]}").utf8).withUnsafeBytes {
                try JSONParser.parseKeepingRaw(
                    bytes: $0, member: "flow", nested: "results",
                    known: Fixed(values: [(Array(tower.utf8), towerNesting)]))
            }
        }
        #expect(throws: JSONValue.ParseError.self, "a known prefix never hides a broken answer") {
            try Data((#"{"results":[{"flow":"# + flow + "]}").utf8).withUnsafeBytes {
                try JSONParser.parseKeepingRaw(
                    bytes: $0, member: "flow", nested: "results", known: Fixed(values: [(Array(flow.utf8), nesting)]))
            }
        }
    }

    /// A valid flow's canonical bytes, its content hash declared.
    static var validFlow: Data? {
        let base: JSONValue = .object([
            "schema_version": .number(1), "id": .string("f"), "version": .string("v"),
            "screens": .array([.object(["id": .string("a"), "components": .array([])])]),
        ])
        guard case .object(var members) = base else { return nil }
        members["content_hash"] = .string(FlowDocument.computeContentHash(base))
        return CanonicalJSON.data(.object(members))
    }

    @Test("an entry's bytes, written member by member, are the canonical JSON of its metadata and flow")
    func entryIsCanonical() throws {
        let flow = try #require(
            FlowDocument.validate(
                .object([
                    "schema_version": .number(1), "id": .string("f\u{e9}\"q"), "version": .string("v"),
                    "screens": .array([.object(["id": .string("a"), "components": .array([])])]),
                ]), location: "t"
            ).0)
        for user in ["u\n1", "\u{1F600}"] {
            let identity = Identity(userID: user, attributes: ["plan": .string("pro")])
            let data = CacheStore.entryData(
                placement: "pay\\wall", identity: identity, document: flow, ttlSeconds: 300, tier: .network,
                resolvedAt: Date(timeIntervalSince1970: 1_700_000_000.5))
            let json = try JSONValue.parse(data)
            #expect(CanonicalJSON.data(json) == data, "canonical as it is")
            #expect(json["user_id"] == .string(user) && json["placement"] == .string("pay\\wall"))
            #expect(json["ttl_seconds"] == .number(300) && json["schema_version"] == .number(1))
            #expect(json["content_hash"] == .null && json["flow"] == flow.json)
            #expect(json["flow_sha256"] == .string(Digest.sha256Hex(CanonicalJSON.data(flow.json))))
        }
    }

    @Test("a resolve request's body, written member by member, is the canonical JSON of the identity and keys")
    func requestBodyIsCanonical() throws {
        let client = ResolveClient(baseURL: "http://127.0.0.1:9", appID: "demo", apiKey: nil)
        for identity in [
            Identity(userID: "u\"1\n"),
            Identity(
                userID: "\u{1F600}", attributes: ["z": .number(1e21), "a": .object(["y": .bool(true), "b": .null])]),
        ] {
            for keys in [nil, ["pay\\wall", "onboarding"]] {
                var expected: [ExactName: JSONValue] = [
                    "user_id": .string(identity.userID), "attributes": .object(identity.attributes),
                ]
                if let keys { expected["placement_keys"] = .array(keys.map(JSONValue.string)) }
                let body = client.body(identity, keys: keys)
                #expect(Data(body.readableBytesView) == CanonicalJSON.data(.object(expected)))
            }
        }
        var ttl = CanonicalJSON.SortedObject(capacity: 64)
        ttl.integer("a", 300)
        ttl.integer("b", -9_007_199_254_740_993)
        ttl.integer("c", Int.max)
        #expect(
            ttl.finish()
                == CanonicalJSON.data(
                    .object([
                        "a": .integer(300), "b": .integer(-9_007_199_254_740_993), "c": .integer(Int64.max),
                    ])))
    }

    @Test("de-duplication remembers the last 49,152 distinct identities at least, never more than twice that")
    func recentIdentities() {
        var recent = WarmRun.RecentIdentities()
        let generation = WarmRun.RecentIdentities.generation
        func key(_ n: Int) -> WarmRun.FingerprintKey {
            WarmRun.FingerprintKey(Identity(userID: "u\(n)").fingerprint)
        }
        let first = recent.insert(key(0))
        let again = recent.insert(key(0))
        #expect(first && !again, "a repeat is skipped")
        var (largest, wrong, forgotten) = (0, [Int](), [Int]())
        for n in 1..<(3 * generation) {
            if !recent.insert(key(n)) { wrong.append(n) }
            // Every identity of the last `generation` is still known.
            if n >= generation, n % 9_973 == 0, recent.insert(key(n - generation + 1)) {
                forgotten.append(n - generation + 1)
            }
            largest = max(largest, recent.remembered)
        }
        #expect(wrong.isEmpty && forgotten.isEmpty, "taken for repeats: \(wrong.prefix(5)); forgotten: \(forgotten)")
        #expect(largest <= 2 * generation, "bounded: \(largest)")
        let back = recent.insert(key(0))
        #expect(back, "one further back than twice the window is new again (a fresh cache hit)")
    }

    @Test("an identity's fingerprint is computed once and is what equality means")
    func identityFingerprint() {
        let a = Identity(userID: "u", attributes: ["plan": .string("pro"), "n": .number(1)])
        let b = Identity(userID: "u", attributes: ["n": .number(1), "plan": .string("pro")])
        #expect(a == b && a.fingerprint == b.fingerprint && a.fingerprint.count == 64)
        #expect(a != Identity(userID: "u", attributes: ["plan": .string("free")]))
    }

    @Test("recent entry keys spread over all the memo's slots: a warm hashes a key once, not again for its record")
    func recentKeysSpread() {
        // SHA-256 fingerprints, as warm makes them: their first hex digits are uniform, letters as much as digits.
        let fingerprints = (0..<LogKey.Recent.size).map { Digest.sha256Hex(Data("user-\($0)".utf8)) }
        for placement in ["paywall", "onboarding"] {
            let used = Set(fingerprints.map { LogKey.Recent.slot(placement, $0) })
            // As many keys as slots fill about 1 - 1/e of them (63%) when spread at random; reading
            // only each digit's low bits ('a' and '1' alike) left 10 values a digit, under 1,000 slots.
            #expect(used.count > LogKey.Recent.size * 6 / 10, "\(placement): \(used.count) slots used")
            #expect(used.allSatisfy { (0..<LogKey.Recent.size).contains($0) })
        }
        // A key made again while its slot holds it is the same key (prefix and all).
        let key = LogKey.entry(placement: "paywall", fingerprint: fingerprints[7])
        #expect(LogKey.entry(placement: "paywall", fingerprint: fingerprints[7]) == key)
        #expect(LogKey.entry(placement: "onboarding", fingerprint: fingerprints[7]).prefix != key.prefix)
    }
}
