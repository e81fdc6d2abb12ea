import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct CacheInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show entry counts, bytes against budgets, and a per-placement summary",
        discussion: """
            Reads the directory listing and, in a format-2 cache, the log's records;
            never the flows themselves. A format-2 log unchanged since its last
            compaction (a prune, a repair) is answered from the summary that
            compaction wrote, without reading its records.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @OptionGroup var output: FormatOption<CacheInfoReport>

    func run() throws {
        try output.print(CacheInfoReport(try cache.openWhole().summary(at: try Now.date())))
    }
}
