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
    @OptionGroup var output: FormatOption<FlowListing>

    func validate() throws {
        if fresh && stale { throw ValidationError("--fresh and --stale exclude each other") }
    }

    func run() throws {
        let store = try cache.open()
        let scan = store.scan()
        let now = try Now.date()
        if images {
            return Console.out(
                try ImageListing(scan.images, now: now, ttl: store.budgets.imageTTL).rendered(as: output.format))
        }
        let out = BufferedOutput()
        var listing = FlowListing(format: output.format, now: now)
        out.write(listing.start)
        // Handed over a batch at a time: its rows are rendered on every core, then written in order.
        var batch: [CachedFlow] = []
        batch.reserveCapacity(FlowListing.batch)
        try scan.forEachFlow(
            placement: placement, userID: userID, freshness: fresh ? .fresh : stale ? .stale : nil, at: now
        ) { entry in
            batch.append(entry)
            guard batch.count == FlowListing.batch else { return }
            out.write(bytes: try listing.rows(batch))
            batch.removeAll(keepingCapacity: true)
        }
        out.write(bytes: try listing.rows(batch))
        try listing.end { out.write(bytes: $0) }
        out.flush()
    }
}
