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
        #expect(store.lookupAlias(placement: "p")?.0.userID == "first", "the first entry gets its alias at once")
        try put("second", 1)
        try put("third", 2)
        #expect(store.lookupAlias(placement: "p")?.0.userID == "first", "later ones wait for the interval or a flush")
        writer.flush()
        #expect(store.lookupAlias(placement: "p")?.0.userID == "third", "flush points at the newest")
        #expect(try store.verify(repair: false, now: start).findings.isEmpty)
    }

    @Test("a flow equal to one validated before is reused; a different flow under the same hash is validated")
    func flowMemo() throws {
        let memo = FlowMemo()
        let base: JSONValue = .object([
            "schema_version": .number(1), "id": .string("f"), "version": .string("v"),
            "screens": .array([.object(["id": .string("a"), "components": .array([])])]),
        ])
        guard case .object(var members) = base else { return }
        members["content_hash"] = .string(FlowDocument.computeContentHash(base))
        let valid = JSONValue.object(members)
        let (first, _) = memo.validate(valid, location: "a")
        let (again, findings) = memo.validate(valid, location: "b")
        #expect(first != nil && again != nil && findings.isEmpty)
        #expect(first?.encoded === again?.encoded, "the same document, encoded once")
        members["id"] = .string("changed")  // the declared hash no longer matches
        let (tampered, problems) = memo.validate(.object(members), location: "c")
        #expect(tampered == nil && problems.contains { $0.rule == "flow-content-hash" })
    }

    @Test("an identity's fingerprint is computed once and is what equality means")
    func identityFingerprint() {
        let a = Identity(userID: "u", attributes: ["plan": .string("pro"), "n": .number(1)])
        let b = Identity(userID: "u", attributes: ["n": .number(1), "plan": .string("pro")])
        #expect(a == b && a.fingerprint == b.fingerprint && a.fingerprint.count == 64)
        #expect(a != Identity(userID: "u", attributes: ["plan": .string("free")]))
    }
}
