import ArgumentParser
import FlowPilotCore
import Foundation

struct CacheClear: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear",
        abstract: "Empty the cache: flows (clearCache), images (clearImageCache) or all",
        discussion: """
            --flows removes flows, their aliases, fonts and icons, as the SDK's clearCache().
            --images removes images and icons, as clearImageCache().
            Without a flag, --all.
            Needs --force when standard input is not a terminal.
            Counts only the files really removed; one that cannot be removed is
            named on standard error with the reason, and the exit status is 73.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @Flag(help: "Flows, aliases, fonts and icons.") var flows = false
    @Flag(help: "Images and icons.") var images = false
    @Flag(help: "Everything (the default).") var all = false
    @Flag(help: "Do it without a terminal to confirm on.") var force = false

    func validate() throws {
        if [flows, images, all].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --flows, --images, --all")
        }
    }

    func run() throws {
        let store = try cache.openWhole()
        let scope: CacheStore.ClearScope = flows ? .flows : images ? .images : .all
        if !force {
            guard isatty(STDIN_FILENO) != 0 else {
                throw FPError.usage("cache clear needs --force when standard input is not a terminal")
            }
            Console.raw("clear \(scope.rawValue) in \(store.root)? [y/N] ")
            guard readLine()?.lowercased().hasPrefix("y") == true else { throw Verdict.negative }
        }
        let result = try store.clear(scope)
        for failure in result.failed { Console.warn("could not remove \(failure.path): \(failure.reason)") }
        Console.note(
            "cleared \(scope.rawValue): \(result.files) files, \(result.bytes) bytes"
                + (result.failed.isEmpty ? "" : "; could not remove \(result.failed.count)"))
        if !result.failed.isEmpty { throw Verdict.incomplete }
    }
}
