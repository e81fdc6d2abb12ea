import ArgumentParser
import FlowPilotCore
import Foundation

struct CachePut: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Write flows and images into a cache from JSON Lines, as the SDK would",
        discussion: """
            Each line is a flow entry, {"placement", "user_id", "attributes",
            "ttl_seconds", "flow" or "flow_file", "resolved_at"?}, or an image,
            {"image_url", "image_file"}.
            resolved_at is an RFC 3339 time, not in the future (default: now);
            ttl_seconds is 0 to 2147483647 (default 300).
            Flows are validated before they are written; an invalid line is reported
            (exit 65) and the lines before it stay written.
            The directory is created when missing.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @Option(help: "JSON Lines file, or - for standard input.") var input: String = "-"

    func run() throws {
        // The input first: a path that cannot be read must not leave a new, empty cache behind.
        let handle =
            input == "-" ? FileHandle.standardInput : try InputFile.handle(input, "put input", kind: .stream)
        let store = try cache.openMigrating()
        var put = CachePutInput(store: store)
        put.now = try Now.pinned()
        let count = try put.write(handle, name: input)
        Console.note("wrote \(count) entries to \(store.root)")
    }
}
