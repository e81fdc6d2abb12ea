import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
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

    /// The summary as its JSON document: with `schema_version`, and the core's fields.
    struct Document: Encodable {
        let schemaVersion = JSONOutput.schemaVersion
        let summary: CacheSummary

        func encode(to encoder: Encoder) throws {
            try summary.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(schemaVersion, forKey: .schemaVersion)
        }

        enum Key: String, CodingKey { case schemaVersion }
    }

    func run() throws {
        let info = try cache.open().summary(at: try Now.date())
        switch output.format {
        case .json: Console.out(try JSONOutput.string(Document(summary: info)))
        case .csv: Console.out(Self.placements(info, alias: { "\($0)" }).csv())
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
                Console.out("\n" + Self.placements(info, alias: { $0 ? "yes" : "no" }).text())
            }
        }
    }

    /// The per-placement table; CSV says the alias as `true`/`false`, text as `yes`/`no`.
    static func placements(_ info: CacheSummary, alias: (Bool) -> String) -> Table {
        Table(
            columns: ["placement", "entries", "fresh", "stale", "bytes", "alias"],
            rows: info.placements.map {
                [$0.placement, "\($0.entries)", "\($0.fresh)", "\($0.stale)", "\($0.bytes)", alias($0.alias)]
            })
    }
}
