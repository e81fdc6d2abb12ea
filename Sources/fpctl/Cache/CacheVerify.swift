import ArgumentParser
import FlowPilotCore
import FlowPilotOutput

struct CacheVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every entry, alias, image and font; --repair removes what is broken",
        discussion: """
            Prints one finding per line, RULE: PATH: MESSAGE, or ok (or JSON, CSV).
            With --repair, removes exactly the files the findings name.
            Exit status: 0 clean, 65 findings (also after a repair, which says what it removed).
            """
    )

    @OptionGroup var cache: CacheDirOption
    @Flag(help: "Remove broken entries, dangling aliases, debris and foreign files.") var repair = false
    @OptionGroup var output: FormatOption

    func run() throws {
        let store = try cache.open()
        let findings = try store.verify(repair: repair)
        try output.print(VerifyReport(findings: findings, repaired: repair))
        if !findings.isEmpty { throw Verdict.invalid }
    }
}
