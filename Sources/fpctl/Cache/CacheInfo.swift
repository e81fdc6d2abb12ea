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
            never the flows themselves.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @OptionGroup var output: FormatOption<CacheInfoReport>

    func run() throws {
        try output.print(CacheInfoReport(try cache.open().summary(at: try Now.date())))
    }
}
