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

    func run() throws {
        try output.print(CacheInfoReport(try cache.open().summary(at: try Now.date())))
    }
}
