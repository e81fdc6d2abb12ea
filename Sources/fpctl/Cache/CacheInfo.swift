import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct CacheInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show entry counts, bytes against budgets, and a per-placement summary",
        discussion: """
            Reads the directory listing and, in a format-2 cache, what the log says
            of its entries. A log unchanged since its last compaction (a prune, a
            repair) is answered from the summary that compaction wrote; any other
            from each sealed segment's index and facts (a segment being written,
            or one whose facts do not hold, from its records). It reads a key's
            records only where two share a millisecond, and reads each flow a key
            written more than once points at (once a flow), to tell whether it
            reads back whole.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @OptionGroup var output: FormatOption<CacheInfoReport>

    func run() throws {
        try output.print(CacheInfoReport(try cache.openWhole().summary(at: try Now.date())))
    }
}
