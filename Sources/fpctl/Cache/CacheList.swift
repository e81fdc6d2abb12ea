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
        let store = try cache.openWhole()
        let scan = store.scanForListing()
        let now = try Now.date()
        if images {
            return Console.out(
                try ImageListing(scan.images, now: now, ttl: store.budgets.imageTTL).rendered(as: output.format))
        }
        let sink = ListingSink(FlowListing(format: output.format, now: now))
        // Made here a batch at a time; JSON and CSV rows rendered (on every core) and written by the handoff's
        // thread meanwhile. The text table's rows wait for its widths anyway: they are kept here, where a
        // second thread's heap does not add to the memory they take.
        let handoff =
            output.format == .text
            ? nil : Handoff<ListedBatch>(capacity: FlowListing.batchesWaiting) { try sink.rows($0) }
        do {
            try scan.forEachFlow(
                placement: placement, userID: userID, freshness: fresh ? .fresh : stale ? .stale : nil, at: now,
                batch: FlowListing.batch
            ) { batch in
                if let handoff { try handoff.submit(batch) } else { try sink.rows(batch) }
            }
        } catch {
            try? handoff?.finish()
            throw error
        }
        try handoff?.finish()
        try sink.end()
    }
}

/// A listing and where its bytes go, used by one thread at a time: the
/// handoff's while rows come, then the command's, once `finish` has waited
/// for it (which orders the two).
private final class ListingSink: @unchecked Sendable {
    private var listing: FlowListing
    private let out = BufferedOutput()

    init(_ listing: FlowListing) {
        self.listing = listing
        out.write(listing.start)
    }

    func rows(_ batch: ListedBatch) throws { try listing.rows(batch) { out.write(raw: $0) } }

    func end() throws {
        try listing.end { out.write(bytes: $0) }
        out.flush()
    }
}
