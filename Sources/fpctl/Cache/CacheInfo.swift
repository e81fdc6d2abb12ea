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
        let schema_version = JSONOutput.schemaVersion
        let cache_dir: String
        let flows: Int
        let fresh: Int
        let stale: Int
        let aliases: Int
        let flow_bytes: Int64
        let images: Int
        let expired_images: Int
        let image_bytes: Int64
        let image_budget_bytes: Int64
        let fonts: Int
        let font_bytes: Int64
        let oldest_resolved_at: Date?
        let newest_resolved_at: Date?
        let placements: [Placement]
    }

    func run() throws {
        try reportingErrors {
            let store = try cache.open()
            let scan = store.scan()
            let now = try Now.date()
            let fresh = scan.flows.filter { $0.isFresh(at: now) }.count
            var byPlacement: [String: [CachedFlow]] = [:]
            for f in scan.flows { byPlacement[f.placement, default: []].append(f) }
            let aliased = Set(scan.aliases.map(\.placement))
            let info = Info(
                cache_dir: store.root, flows: scan.flows.count, fresh: fresh, stale: scan.flows.count - fresh,
                aliases: scan.aliases.count, flow_bytes: scan.flowBytes, images: scan.images.count,
                expired_images: scan.images.filter { $0.isExpired(at: now, ttl: store.budgets.imageTTL) }.count,
                image_bytes: scan.imageBytes, image_budget_bytes: store.budgets.imageDiskBytes,
                fonts: scan.fonts.count, font_bytes: scan.fontBytes,
                oldest_resolved_at: scan.flows.map(\.resolvedAt).min(), newest_resolved_at: scan.flows.map(\.resolvedAt).max(),
                placements: byPlacement.keys.sorted().map { key in
                    let list = byPlacement[key]!
                    let f = list.filter { $0.isFresh(at: now) }.count
                    return Placement(placement: key, entries: list.count, fresh: f, stale: list.count - f,
                                     bytes: list.reduce(0) { $0 + $1.size }, alias: aliased.contains(key))
                })
            switch output.format {
            case .json: Console.out(try JSONOutput.string(info))
            case .csv:
                Console.out(Table(columns: ["placement", "entries", "fresh", "stale", "bytes", "alias"],
                                  rows: info.placements.map { [$0.placement, "\($0.entries)", "\($0.fresh)", "\($0.stale)", "\($0.bytes)", "\($0.alias)"] }).csv())
            case .table:
                Console.out("""
                    cache_dir   \(info.cache_dir)
                    flows       \(info.flows) (\(info.fresh) fresh, \(info.stale) stale), \(info.aliases) aliases, \(info.flow_bytes) bytes
                    images      \(info.images) (\(info.expired_images) expired), \(info.image_bytes) of \(info.image_budget_bytes) bytes
                    fonts       \(info.fonts), \(info.font_bytes) bytes
                    resolved    \(info.oldest_resolved_at.map(iso) ?? "-") .. \(info.newest_resolved_at.map(iso) ?? "-")

                    """)
                if !info.placements.isEmpty {
                    Console.out("\n" + Table(columns: ["placement", "entries", "fresh", "stale", "bytes", "alias"],
                                             rows: info.placements.map { [$0.placement, "\($0.entries)", "\($0.fresh)", "\($0.stale)", "\($0.bytes)", $0.alias ? "yes" : "no"] }).text())
                }
            }
        }
    }
}
