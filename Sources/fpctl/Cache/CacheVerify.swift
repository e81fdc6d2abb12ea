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

    struct Result: Encodable {
        let schemaVersion = JSONOutput.schemaVersion
        let clean: Bool
        let repaired: Bool
        let findings: [Finding]
    }

    func run() throws {
        let store = try cache.open()
        let findings = try store.verify(repair: repair)
        switch output.format {
        case .json:
            Console.out(
                try JSONOutput.string(Result(clean: findings.isEmpty, repaired: repair, findings: findings)))
        case .csv:
            Console.out(
                Table(
                    columns: ["rule", "path", "message", "removed"],
                    rows: findings.map { [$0.rule, $0.path, $0.message, String(repair)] }
                ).csv())
        case .table:
            for f in findings { Console.out((repair ? "removed: " : "") + f.line + "\n") }
            if findings.isEmpty { Console.out("ok\n") }
        }
        if !findings.isEmpty { throw Verdict.invalid }
    }
}
