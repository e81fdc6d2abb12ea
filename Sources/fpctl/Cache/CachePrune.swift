import ArgumentParser
import FlowPilotCore
import FlowPilotOutput

struct CachePrune: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Remove expired, old, over-budget, unreferenced or one identity's entries",
        discussion: """
            Older copies that a write left behind always go.
            A stale flow is never removed just for being stale: it is the offline
            fallback; --older-than or --user-id remove flows.
            --dry-run prints exactly what would go and the bytes it would free.
            Only files really removed are listed; one that cannot be removed is
            named on standard error with the reason, and the exit status is 73.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @Flag(help: "Images past their TTL (7 days).") var expired = false
    @Option(
        name: .customLong("older-than"), parsing: .unconditional,
        help: "Flows resolved, and images last used, longer ago than this (e.g. 7d).")
    var olderThan: DurationArgument?
    @Option(name: .customLong("max-size"), help: "Trim images to this size, least recently used first (e.g. 200MiB).")
    var maxSize: SizeArgument?
    @Option(name: .customLong("user-id"), help: "That identity's flows and the aliases pointing at them.")
    var userID: String?
    @Flag(help: "Images and fonts no cached flow refers to.") var unreferenced = false
    @Flag(help: "Only images.") var images = false
    @Flag(help: "Only flows (and fonts).") var flows = false
    @Flag(name: .customLong("dry-run"), help: "Print what would be removed; remove nothing.") var dryRun = false
    @OptionGroup var output: FormatOption<PruneReport>

    func validate() throws {
        if images && flows { throw ValidationError("--images and --flows exclude each other") }
        try olderThan?.check("--older-than", from: DurationArgument("0s", seconds: 0), to: .longest)
    }

    func run() throws {
        let store = try cache.openWhole()
        var o = CacheStore.PruneOptions()
        o.expired = expired
        o.olderThan = olderThan?.seconds
        o.maxImageBytes = maxSize?.bytes
        o.userID = userID
        o.unreferenced = unreferenced
        o.images = !flows
        o.flows = !images
        o.dryRun = dryRun
        // The clock once the lock is held, unless FPCTL_NOW pins it.
        o.now = try Now.pinned()
        let result = try store.prune(o)
        let report = PruneReport(result, dryRun: dryRun)
        let out = BufferedOutput()
        try report.write(as: output.format) { out.write(bytes: $0) }
        out.flush()
        try report.warnings(Console.warn)
        Console.note(report.summary)
        if !result.failed.isEmpty { throw Verdict.incomplete }
    }
}
