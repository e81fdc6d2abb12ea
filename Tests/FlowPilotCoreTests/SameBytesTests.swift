import Foundation
import Testing

@testable import FlowPilotCore

/// Names are their bytes in the cache (#64, point 1): "café" precomposed
/// (NFC, `c3 a9`) and "cafe" with a combining accent (NFD, `65 cc 81`) are
/// two identities and two placements, as the fingerprint and the backend see
/// them, though Swift's `==` calls them equal.
@Suite("names compared as bytes")
final class SameBytesTests {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bytes-\(UUID().uuidString)").path
    deinit { try? FileManager.default.removeItem(atPath: scratch) }

    static let nfc = "caf\u{E9}"
    static let nfd = "cafe\u{301}"

    static func flow(_ version: String) -> FlowDocument {
        let json: JSONValue = .object([
            "schema_version": .number(1), "id": .string("flow_paywall"), "version": .string(version),
            "screens": .array([.object(["id": .string("s"), "components": .array([])])]),
        ])
        return FlowDocument.validate(json, location: "test").0!
    }

    @Test(
        "a JSON object's keys are their bytes: both spellings are two members, written in byte order, and read back by position and as an identity"
    )
    func jsonKeysAsBytes() throws {
        let (nfc, nfd) = (Self.nfc, Self.nfd)
        let text = #"{"\#(nfd)":2,"\#(nfc)":1}"#
        let parsed = try JSONValue.parse(Data(text.utf8))
        let object = try #require(parsed.objectValue)
        #expect(object.count == 2, "two members, not a duplicate key")
        #expect(object[ExactName(nfc)] == .integer(1) && object[ExactName(nfd)] == .integer(2))
        #expect(parsed[nfd] == .integer(2), "looked up by the bytes asked for")
        // Canonical order is by bytes: "cafe" + U+0301 (65 cc 81) sorts before "caf" + U+00E9 (c3 a9).
        #expect(Array(CanonicalJSON.data(parsed)) == Array(#"{"\#(nfd)":2,"\#(nfc)":1}"#.utf8))
        let members = try Data(text.utf8).withUnsafeBytes { try JSONValue.parseMembers(bytes: $0) }
        #expect(members.count == 2 && members[0].key.sameBytes(as: nfd) && members[1].key.sameBytes(as: nfc))
        // The same bytes twice are still refused, by both readers.
        let duplicate = Data(#"{"\#(nfc)":1,"\#(nfc)":2}"#.utf8)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(duplicate) }
        #expect(throws: JSONValue.ParseError.self) {
            try duplicate.withUnsafeBytes { try JSONValue.parseMembers(bytes: $0) }
        }
        // A finding's position names the member of its own spelling.
        let (value, positions) = try JSONValue.parse(Data("{\n\"\(nfc)\": 1,\n\"\(nfd)\": 2\n}".utf8), positions: true)
        #expect(value.objectValue?.count == 2)
        var lookup = JSONPositions.Lookup(try #require(positions))
        #expect(
            lookup.position(of: Substring("/\(nfc)")).line == 2 && lookup.position(of: Substring("/\(nfd)")).line == 3)
        // An identity with both attributes is another identity than one with either, and keeps both.
        let both = Identity(userID: "u", attributes: object)
        let one = Identity(userID: "u", attributes: [ExactName(nfc): .integer(1)])
        #expect(both.attributes.count == 2 && !both.fingerprint.sameBytes(as: one.fingerprint))
        let line = try #require(
            try IdentityLines.identity(
                ArraySlice(#"{"user_id":"u","attributes":\#(text)}"#.utf8), name: "ids", lineNumber: 1))
        #expect(line.fingerprint.sameBytes(as: both.fingerprint), "an identities file reads the same identity")
    }

    @Test("an image cached under each spelling of its url is served as its own bytes, from disk and from memory")
    func imagesAsBytes() throws {
        let store = try CacheStore(root: "\(scratch)/\(UUID().uuidString)", create: true)
        let (nfc, nfd) = ("https://img.example/\(Self.nfc).png", "https://img.example/\(Self.nfd).png")
        #expect(try store.storeImage(url: nfc, data: Data("precomposed".utf8)))
        #expect(store.image(url: nfd) == nil, "not cached under the other spelling")
        #expect(try store.storeImage(url: nfd, data: Data("decomposed".utf8)))
        // Each read twice: the second comes from the memory layer, which must not take one url for the other.
        for _ in 0..<2 {
            #expect(store.image(url: nfc) == Data("precomposed".utf8))
            #expect(store.image(url: nfd) == Data("decomposed".utf8))
        }
    }

    @Test("the two spellings are equal to Swift's == and not the same bytes")
    func helper() {
        #expect(Self.nfc == Self.nfd, "the premise: String == is canonical equivalence")
        #expect(!Self.nfc.sameBytes(as: Self.nfd))
        #expect(Self.nfc.sameBytes(as: "caf\u{E9}") && "".sameBytes(as: ""))
        #expect(Self.nfc.sameBytes(as: Substring("xcaf\u{E9}").dropFirst()))
        #expect(String?.none.sameBytes(as: nil) && !Optional(Self.nfc).sameBytes(as: nil))
        #expect((Self.nfc + "/x").hasPrefix(Self.nfd) && !(Self.nfc + "/x").startsWithBytes(Self.nfd))
        #expect((Self.nfc + "/x").startsWithBytes(Self.nfc) && ("x/" + Self.nfc).endsWithBytes("/" + Self.nfc))
        #expect(!("x/" + Self.nfc).endsWithBytes(Self.nfd) && !"a".endsWithBytes("ba"))
        #expect("log/1.seg#64".prefixBytes(before: UInt8(ascii: "#")) == "log/1.seg")
        #expect("ab".prefixBytes(before: 0) == "ab")
    }

    @Test("prune --user-id and list --user-id of one spelling touch only that user's entries", arguments: [1, 2])
    func pruneAndListByUser(format: Int) throws {
        let store = try CacheStore(root: "\(scratch)/\(format)", create: true, newFormat: format)
        for (user, version) in [(Self.nfc, "nfc"), (Self.nfd, "nfd")] {
            try store.storeFlow(
                placement: "paywall", identity: Identity(userID: user), document: Self.flow(version), ttlSeconds: 300,
                tier: .network)
        }
        #expect(store.lookupFlow(placement: "paywall", identity: Identity(userID: Self.nfc))?.1.version == "nfc")
        #expect(store.lookupFlow(placement: "paywall", identity: Identity(userID: Self.nfd))?.1.version == "nfd")
        let listed = store.scan().flows(placement: nil, userID: Self.nfd, freshness: nil, at: Date())
        #expect(listed.map(\.version) == ["nfd"])
        var options = CacheStore.PruneOptions()
        options.userID = Self.nfd
        let removed = try store.prune(options)
        #expect(try removed.removed.array().filter { $0.kind == .flow }.count == 1)
        let reader = try CacheStore(root: store.root)
        #expect(reader.lookupFlow(placement: "paywall", identity: Identity(userID: Self.nfc))?.1.version == "nfc")
        #expect(reader.lookupFlow(placement: "paywall", identity: Identity(userID: Self.nfd)) == nil)
    }

    @Test("a placement of one spelling is a miss for the other, also through the memo of recent keys")
    func placements() throws {
        let store = try CacheStore(root: "\(scratch)/p", create: true, newFormat: 2)
        let user = Identity(userID: "u")
        try store.storeFlow(
            placement: Self.nfc, identity: user, document: Self.flow("nfc"), ttlSeconds: 300, tier: .network)
        #expect(store.lookupFlow(placement: Self.nfc, identity: user)?.1.version == "nfc")
        #expect(store.lookupFlow(placement: Self.nfd, identity: user) == nil)
        let listed = store.scan().flows(placement: Self.nfd, userID: nil, freshness: nil, at: Date())
        #expect(listed.isEmpty)
    }

    @Test(
        "a listing puts the two spellings of a placement apart, by their bytes, however its batches are merged",
        arguments: [1, 2])
    func listingOrder(format: Int) throws {
        let store = try CacheStore(root: "\(scratch)/order-\(format)", create: true, newFormat: format)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        // Alternating spellings, each entry a second newer than the last: by time alone they would interleave.
        for n in 0..<12 {
            try store.storeFlow(
                placement: n % 2 == 0 ? Self.nfc : Self.nfd, identity: Identity(userID: "u\(n)"),
                document: Self.flow("v\(n)"), ttlSeconds: 300, tier: .network, resolvedAt: start + Double(n))
        }
        store.finishWriting()
        for runLength in [3, CacheScan.defaultRunLength] {
            var placements: [String] = []
            try CacheStore(root: store.root).scan().forEachFlow(
                placement: nil, userID: nil, freshness: nil, at: start, runLength: runLength
            ) { placements.append($0.placement) }
            // NFD's `65 cc 81` sorts before NFC's `c3 a9`.
            let expected = Array(repeating: Self.nfd, count: 6) + Array(repeating: Self.nfc, count: 6)
            #expect(placements.count == 12)
            #expect(zip(placements, expected).allSatisfy { $0.sameBytes(as: $1) }, "run length \(runLength)")
        }
    }

    @Test(
        "cache put reads two flow files whose names differ only in spelling as two files, and points both placements' aliases"
    )
    func putFilesAndAliases() throws {
        let dir = "\(scratch)/put"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for (name, version) in [(Self.nfc, "nfc"), (Self.nfd, "nfd")] {
            let data = CanonicalJSON.data(Self.flow(version).json)
            try data.write(to: URL(fileURLWithPath: "\(dir)/\(name).json"))
        }
        let lines = [(Self.nfc, "a"), (Self.nfd, "b")].map { name, user in
            #"{"placement":"\#(name)","user_id":"\#(user)","flow_file":"\#(dir)/\#(name).json"}"#
        }
        let input = "\(dir)/input.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let store = try CacheStore(root: "\(dir)/cache", create: true, newFormat: 2)
        var put = CachePutInput(store: store)
        #expect(try put.write(try FileHandle(forReadingFrom: URL(fileURLWithPath: input)), name: input) == 2)
        let reader = try CacheStore(root: store.root)
        #expect(reader.lookupFlow(placement: Self.nfc, identity: Identity(userID: "a"))?.1.version == "nfc")
        #expect(reader.lookupFlow(placement: Self.nfd, identity: Identity(userID: "b"))?.1.version == "nfd")
        var scan = reader.scan()
        scan.walk { _ in }
        let aliased = scan.aliases.map(\.placement)
        #expect(
            aliased.count == 2 && aliased.contains { $0.sameBytes(as: Self.nfc) }
                && aliased.contains { $0.sameBytes(as: Self.nfd) })
    }
}
