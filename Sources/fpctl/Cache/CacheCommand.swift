import ArgumentParser
import FlowPilotCore
import Foundation

struct CacheCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Inspect, verify, prune and clear an SDK cache directory",
        discussion: """
            The layout is described in docs/cache-format.md.
            Every subcommand takes --cache-dir, or FPCTL_CACHE_DIR from the environment.
            Exit status: 66 missing directory, 65 not a cache or a newer format.
            """,
        subcommands: [
            CacheInfo.self, CacheList.self, CacheVerify.self, CachePrune.self, CacheClear.self, CachePut.self,
        ]
    )
}

/// `--cache-dir DIR`, defaulting to `FPCTL_CACHE_DIR`.
struct CacheDirOption: ParsableArguments {
    @Option(name: .customLong("cache-dir"), help: "The cache directory (default: $FPCTL_CACHE_DIR).")
    var cacheDir: String?

    func path() throws -> String {
        if let cacheDir { return cacheDir }
        if let env = ProcessInfo.processInfo.environment["FPCTL_CACHE_DIR"], !env.isEmpty { return env }
        throw FPError.usage("no cache directory: pass --cache-dir or set FPCTL_CACHE_DIR")
    }

    func open(create: Bool = false) throws -> CacheStore {
        try CacheStore(root: try path(), create: create)
    }
}

func iso(_ date: Date) -> String { RFC3339.string(date) }
