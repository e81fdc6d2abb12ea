import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct CacheList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List cached flows, or images with --images",
        discussion: """
            One row per flow entry: placement, user id (when known), fingerprint prefix,
            flow id, version, age, TTL, fresh or stale, size.
            With --images, one row per image: URL, size, age, last access, expired.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @Option(help: "Only this placement.") var placement: String?
    @Option(name: .customLong("user-id"), help: "Only this user id.") var userID: String?
    @Flag(help: "Only fresh entries.") var fresh = false
    @Flag(help: "Only stale entries.") var stale = false
    @Flag(help: "List images instead of flows.") var images = false
    @OptionGroup var output: FormatOption

    struct ImageRow: Encodable {
        let url: String
        let size: Int64
        let ageSeconds: Int
        let lastAccess: Date
        let expired: Bool
    }

    struct Rows<T: Encodable>: Encodable {
        let schemaVersion = JSONOutput.schemaVersion
        let rows: [T]
    }

    func validate() throws {
        if fresh && stale { throw ValidationError("--fresh and --stale exclude each other") }
    }

    func run() throws {
        let store = try cache.open()
        let scan = store.scan()
        let now = try Now.date()
        if images { return try listImages(store, scan, now) }
        let entries = scan.flows(
            placement: placement, userID: userID, freshness: fresh ? .fresh : stale ? .stale : nil, at: now)
        guard output.format != .json else {
            // Streamed row by row: 100,000 entries must not become one document in memory.
            let out = BufferedOutput()
            var document = JSONRows()
            out.write(document.start)
            for e in entries { out.write(document.row(Self.json(e, now: now))) }
            out.write(document.end)
            out.flush()
            return
        }
        let table = Table(
            columns: ["placement", "user_id", "fingerprint", "flow_id", "version", "age", "ttl", "state", "size"],
            rows: entries.map {
                [
                    $0.placement, $0.userID ?? "-", String($0.fingerprint.prefix(12)), $0.flowID, $0.version,
                    "\(Int($0.age(at: now)))s", "\($0.ttlSeconds)s", $0.isFresh(at: now) ? "fresh" : "stale",
                    "\($0.size)",
                ]
            })
        Console.out(output.render(table))
    }

    /// One entry as a row of the JSON listing.
    static func json(_ e: CachedFlow, now: Date) -> JSONValue {
        .object([
            "placement": .string(e.placement), "user_id": e.userID.map(JSONValue.string) ?? .null,
            "fingerprint": .string(e.fingerprint), "flow_id": .string(e.flowID), "version": .string(e.version),
            "resolved_at": .string(RFC3339.string(e.resolvedAt)),
            "age_seconds": .number(Double(Int(e.age(at: now)))),
            "ttl_seconds": .number(Double(e.ttlSeconds)), "fresh": .bool(e.isFresh(at: now)),
            "size": .number(Double(e.size)),
        ])
    }

    private func listImages(_ store: CacheStore, _ scan: CacheScan, _ now: Date) throws {
        let rows = scan.images.map { image -> ImageRow in
            ImageRow(
                url: image.url ?? "?", size: image.size, ageSeconds: Int(now.timeIntervalSince(image.downloadedAt)),
                lastAccess: image.lastAccess, expired: image.isExpired(at: now, ttl: store.budgets.imageTTL))
        }.sorted { $0.url < $1.url }
        switch output.format {
        case .json: Console.out(try JSONOutput.string(Rows(rows: rows)))
        case .csv, .table:
            let table = Table(
                columns: ["url", "size", "age", "last_access", "expired"],
                rows: rows.map {
                    [$0.url, "\($0.size)", "\($0.ageSeconds)s", iso($0.lastAccess), $0.expired ? "yes" : "no"]
                })
            Console.out(output.render(table))
        }
    }
}
