import ArgumentParser
import FlowPilotCore
import Foundation

struct CacheInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show entry counts, bytes against budgets, and a per-placement summary",
        discussion: """
            Reads only the directory listing, never the entries themselves.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @OptionGroup var output: FormatOption

    struct Placement: Encodable {
        let placement: String
        let entries: Int
        let fresh: Int
        let stale: Int
        let bytes: Int64
        let alias: Bool
    }

    struct Info: Encodable {
        let schemaVersion = JSONOutput.schemaVersion
        let cacheDir: String
        let flows: Int
        let fresh: Int
        let stale: Int
        let aliases: Int
        let flowBytes: Int64
        let images: Int
        let expiredImages: Int
        let imageBytes: Int64
        let imageBudgetBytes: Int64
        let fonts: Int
        let fontBytes: Int64
        let oldestResolvedAt: Date?
        let newestResolvedAt: Date?
        let placements: [Placement]
    }

    func run() throws {
        let store = try cache.open()
        let scan = store.scan()
        let now = try Now.date()
        let fresh = scan.flows.filter { $0.isFresh(at: now) }.count
        var byPlacement: [String: [CachedFlow]] = [:]
        for f in scan.flows { byPlacement[f.placement, default: []].append(f) }
        let aliased = Set(scan.aliases.map(\.placement))
        let info = Info(
            cacheDir: store.root, flows: scan.flows.count, fresh: fresh, stale: scan.flows.count - fresh,
            aliases: scan.aliases.count, flowBytes: scan.flowBytes, images: scan.images.count,
            expiredImages: scan.images.filter { $0.isExpired(at: now, ttl: store.budgets.imageTTL) }.count,
            imageBytes: scan.imageBytes, imageBudgetBytes: store.budgets.imageDiskBytes,
            fonts: scan.fonts.count, fontBytes: scan.fontBytes,
            oldestResolvedAt: scan.flows.map(\.resolvedAt).min(),
            newestResolvedAt: scan.flows.map(\.resolvedAt).max(),
            placements: byPlacement.sorted { $0.key < $1.key }.map { key, list in
                let f = list.filter { $0.isFresh(at: now) }.count
                return Placement(
                    placement: key, entries: list.count, fresh: f, stale: list.count - f,
                    bytes: list.reduce(0) { $0 + $1.size }, alias: aliased.contains(key))
            })
        switch output.format {
        case .json: Console.out(try JSONOutput.string(info))
        case .csv:
            Console.out(
                Table(
                    columns: ["placement", "entries", "fresh", "stale", "bytes", "alias"],
                    rows: info.placements.map {
                        [$0.placement, "\($0.entries)", "\($0.fresh)", "\($0.stale)", "\($0.bytes)", "\($0.alias)"]
                    }
                ).csv())
        case .table:
            Console.out(
                """
                cache_dir   \(info.cacheDir)
                flows       \(info.flows) (\(info.fresh) fresh, \(info.stale) stale), \(info.aliases) aliases, \(info.flowBytes) bytes
                images      \(info.images) (\(info.expiredImages) expired), \(info.imageBytes) of \(info.imageBudgetBytes) bytes
                fonts       \(info.fonts), \(info.fontBytes) bytes
                resolved    \(info.oldestResolvedAt.map(iso) ?? "-") .. \(info.newestResolvedAt.map(iso) ?? "-")

                """)
            if !info.placements.isEmpty {
                Console.out(
                    "\n"
                        + Table(
                            columns: ["placement", "entries", "fresh", "stale", "bytes", "alias"],
                            rows: info.placements.map {
                                [
                                    $0.placement, "\($0.entries)", "\($0.fresh)", "\($0.stale)", "\($0.bytes)",
                                    $0.alias ? "yes" : "no",
                                ]
                            }
                        ).text())
            }
        }
    }
}
