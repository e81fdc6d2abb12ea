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
            CacheMigrate.self,
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

    /// Opens the cache for a command that reads it whole (info, list,
    /// verify, prune, clear, migrate), whose large buffers are returned to
    /// the system once freed (`Platform.returnLargeBuffersToSystem`), so its
    /// peak memory stays flat at any size (#62).
    func openWhole() throws -> CacheStore {
        Platform.returnLargeBuffersToSystem()
        return try open()
    }

    /// Opens the cache for a writer of many entries (`warm`, `cache put`):
    /// unless `FPCTL_CACHE_FORMAT=1`, a format-1
    /// cache is migrated first (docs/cache-format.md, "Migrating from format
    /// 1"), or, where its locks do nothing, written as format 1 with a warning.
    func openMigrating() throws -> CacheStore {
        try CacheStore.opening(root: try path(), create: true, migrate: true, warning: Console.warn)
    }
}
