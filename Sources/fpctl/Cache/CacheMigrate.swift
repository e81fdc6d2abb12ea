import ArgumentParser
import FlowPilotCore
import Foundation

struct CacheMigrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Move a format-1 cache to format 2 (a log of records, each flow stored once)",
        discussion: """
            Format 2 keeps each distinct flow once and each entry as a record of about
            200 bytes in a log (docs/cache-format.md). warm and cache put migrate a
            format-1 cache before writing (unless FPCTL_CACHE_FORMAT=1); this does it on its own, under
            the cache's exclusive lock, and says what it carried over. An entry that was
            unreadable or corrupt (a miss before) is carried over as a miss, still listed
            and still a cache verify finding, and named on standard error. A kill at any
            moment leaves the cache readable as one format or the other, with the same
            answers, and running migrate again finishes the work.
            Exit status: 0 done (or nothing to do), 73 the lock keeps nobody out on this
            file system or the cache cannot be written.
            """
    )

    @OptionGroup var cache: CacheDirOption

    func run() throws {
        let store = try cache.openWhole()
        guard store.needsMigration else {
            return Console.note("\(store.root) is cache format \(store.version) already; nothing to do")
        }
        let result = try store.migrate()
        for path in result.unreadable {
            Console.warn("\(path): unreadable or not a valid entry, a miss before and after")
        }
        if result.from >= 2 {
            return Console.note("\(store.root): removed what a migration to format 2 had left of format 1")
        }
        Console.note(
            "migrated \(store.root) to cache format 2: \(result.entries) entries, \(result.aliases) aliases, "
                + "\(result.objects) distinct flows stored once, \(result.unreadable.count) unreadable, in "
                + String(format: "%.2f", result.seconds) + " s")
    }
}
