import ArgumentParser
import FlowPilotCore

struct CacheVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every entry, alias, image and font; --repair removes what is broken",
        discussion: """
            Prints one finding per line, RULE: PATH: MESSAGE, or ok.
            With --repair, removes exactly the files the findings name.
            Exit status: 0 clean, 65 findings (also after a repair, which says what it removed).
            """
    )

    @OptionGroup var cache: CacheDirOption
    @Flag(help: "Remove broken entries, dangling aliases, debris and foreign files.") var repair = false

    func run() throws {
        try reportingErrors {
            let store = try cache.open()
            let findings = try store.verify(repair: repair)
            for f in findings { Console.out((repair ? "removed: " : "") + f.line + "\n") }
            if findings.isEmpty { Console.out("ok\n") } else { throw ExitCode(65) }
        }
    }
}
