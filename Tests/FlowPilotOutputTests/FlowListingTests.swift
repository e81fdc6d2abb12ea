import FlowPilotCore
import Foundation
import Testing

@testable import FlowPilotOutput

/// `cache list` renders its rows a batch at a time on every core: whatever
/// the batches, the bytes are those of the whole document in its one layout,
/// and the CSV's rows those of `Table`, in the entries' order.
@Suite("a listing's rows rendered in batches")
struct FlowListingTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func entries(_ count: Int) -> [CachedFlow] {
        (0..<count).map { n -> CachedFlow in
            let placement = n % 3 == 0 ? "caf\u{e9}" : "paywall"
            let user: String? = n % 7 == 0 ? nil : "user-\(n)\u{1}"
            let resolved = now - Double(n)
            return CachedFlow(
                placement: placement, fingerprint: String(repeating: "ab", count: 32), userID: user,
                flowID: "flow_\(n % 5)", version: "v\(n)", resolvedAt: resolved, ttlSeconds: 300, size: Int64(n),
                path: "log/x#\(n)")
        }
    }

    static func printed(_ format: OutputFormat, _ entries: [CachedFlow], batch: Int) throws -> String {
        var listing = FlowListing(format: format, now: now)
        var out = [UInt8](listing.start)
        for start in stride(from: 0, to: entries.count, by: batch) {
            out += try listing.rows(Array(entries[start..<min(start + batch, entries.count)]))
        }
        out += try listing.rows([])
        try listing.end { out += $0 }
        return String(decoding: out, as: UTF8.self)
    }

    @Test("JSON and CSV are the same bytes in any batches, and JSON the whole document's", arguments: [0, 1, 5_000])
    func batches(count: Int) throws {
        let entries = Self.entries(count)
        let rows: [JSONValue] = entries.map { e in
            var row: [ExactName: JSONValue] = [
                "age_seconds": .integer(Int64(e.age(at: Self.now))), "fingerprint": .string(e.fingerprint),
                "flow_id": .string(e.flowID), "fresh": .bool(e.isFresh(at: Self.now)),
                "placement": .string(e.placement),
                "resolved_at": .string(RFC3339.string(e.resolvedAt)), "size": .integer(e.size),
                "ttl_seconds": .integer(Int64(e.ttlSeconds)), "user_id": .null, "version": .string(e.version),
            ]
            if let user = e.userID { row["user_id"] = .string(user) }
            return .object(row)
        }
        // No rows: the stream's `[` and `]` on lines of their own, as `JSONDocument.Stream` says.
        let whole =
            count == 0
            ? "{\"rows\":[\n],\"schema_version\":1}\n"
            : String(decoding: JSONDocument.data(["rows": .array(rows)]), as: UTF8.self)
        for batch in [1, 3, FlowListing.batch, 10_000] {
            #expect(try Self.printed(.json, entries, batch: batch) == whole, "batches of \(batch)")
            #expect(try Self.printed(.csv, entries, batch: batch) == Self.printed(.csv, entries, batch: 1))
        }
        let csv = try Self.printed(.csv, entries, batch: FlowListing.batch).split(separator: "\n")
        #expect(csv.count == count + 1)
        #expect(zip(csv.dropFirst(), entries).allSatisfy { $0.hasSuffix(",\($1.size)") }, "in the entries' order")
    }
}

/// A format-2 listing's JSON rows are written from the records' bytes
/// (`ListedBatch.withFields`), no entry made: the same bytes as the rows of
/// the entries `ListedBatch.entry` makes.
@Suite("a listing's JSON rows from records' bytes")
struct ListedBatchRowsTests {
    @Test("the same bytes as from the entries, for names that need escapes, two spellings and no user id")
    func sameBytes() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("listed-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let store = try FlowPilotCore.CacheStore(root: root, create: true, newFormat: 2)
        let json: JSONValue = .object([
            "schema_version": .number(1), "id": .string("flow \"q\"\\\u{1}"), "version": .string("v\u{7}\n"),
            "screens": .array([.object(["id": .string("s"), "components": .array([])])]),
        ])
        let flow = try #require(FlowDocument.validate(json, location: "test").0)
        let placements = ["caf\u{e9}", "cafe\u{301}", "pay\"wall\\", "\u{1F600}"]
        for n in 0..<40 {
            _ = try store.storeFlow(
                placement: placements[n % placements.count],
                identity: Identity(userID: n < placements.count ? "" : "user \(n)\t\"x\""),
                document: flow, ttlSeconds: n % 3 == 0 ? 0 : 300, tier: .network,
                resolvedAt: FlowListingTests.now - Double(n * 97))
        }
        store.finishWriting()
        var fromBytes = FlowListing(format: .json, now: FlowListingTests.now)
        var fromEntries = FlowListing(format: .json, now: FlowListingTests.now)
        var (a, b): ([UInt8], [UInt8]) = ([], [])
        var rowsRead = 0
        try FlowPilotCore.CacheStore(root: root).scan().forEachFlow(
            placement: nil, userID: nil, freshness: nil, at: FlowListingTests.now, batch: 7
        ) { batch in
            rowsRead += (0..<batch.count).filter { batch.withFields($0) { _ in true } == true }.count
            a += try fromBytes.rows(batch)
            b += try fromEntries.rows((0..<batch.count).compactMap { batch.entry($0) })
        }
        #expect(rowsRead == 40, "every entry read from its record's bytes")
        #expect(a == b)
        #expect(String(decoding: a, as: UTF8.self).contains(#""flow_id":"flow \"q\"\\\u0001""#))
    }
}
