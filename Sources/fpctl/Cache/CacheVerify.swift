import ArgumentParser
import FlowPilotCore
import FlowPilotOutput

struct CacheVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every entry, alias, image and font; --repair removes what is broken",
        discussion: """
            Prints one finding per line, RULE: PATH: MESSAGE, or ok (or JSON, CSV).
            With --repair, removes exactly the files the findings name, and says of
            each whether it was removed (removed: ...) or not (not removed (REASON): ...).
            Exit status: 0 clean, 65 findings (also after a repair that removed them
            all), 73 a file a finding names could not be removed.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @Flag(help: "Remove broken entries, dangling aliases, debris and foreign files.") var repair = false
    @OptionGroup var output: FormatOption<VerifyReport>

    func run() throws {
        let root = try cache.path()
        // A damaged marker is a finding of its own: the cache cannot be opened until it is mended.
        var mended: [Finding] = []
        if let damage = CacheStore.damagedMarker(root: root) {
            guard repair else {
                try output.print(VerifyReport(.init(findings: [damage.finding], notRemoved: [:]), repaired: false))
                throw Verdict.invalid
            }
            mended = try CacheStore.mendMarker(root: root).map { [$0] } ?? []
        }
        let store = try cache.openWhole()
        var verification = try store.verify(repair: repair, now: try Now.pinned())
        verification = .init(findings: mended + verification.findings, notRemoved: verification.notRemoved)
        let report = VerifyReport(verification, repaired: repair)
        try output.print(report)
        if report.incomplete { throw Verdict.incomplete }
        if !verification.findings.isEmpty { throw Verdict.invalid }
    }
}
