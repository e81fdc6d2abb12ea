import Foundation
import Synchronization

/// Whether a cache needs migrating, the marker's version read again, and
/// `migrate`, which `CacheMigration` carries out.
extension CacheStore {
    /// What a migration did.
    public struct Migration: Sendable {
        /// The format before (2 when there was nothing to do).
        public var from: Int
        public var entries = 0
        public var aliases = 0
        public var objects = 0
        /// Entries that were unreadable, corrupt or not a valid flow (a miss
        /// before): carried over as records whose flow is missing, still a
        /// miss and a `verify` finding, as before.
        public var unreadable: [String] = []
        public var seconds: Double = 0
    }

    /// Whether a migration to format 2 would do anything: the marker says 1,
    /// or a migration's switch was made and `flows/` or `aliases/` are still there.
    public var needsMigration: Bool {
        currentVersion() < 2 || access(flowsDir, F_OK) == 0 || access(aliasesDir, F_OK) == 0
    }

    /// The version the marker says now: another process may have migrated
    /// the cache since this store was opened. Read at most once a second
    /// (a format-1 store's writes and misses ask), and never again once 2.
    func currentVersion() -> Int {
        if version >= 2 || migratedSinceOpen.load(ordering: .relaxed) { return 2 }
        let due = versionChecked.withLock { last -> Bool in
            if let last, ContinuousClock.now - last < .seconds(1) { return false }
            last = .now
            return true
        }
        guard due, let data = FileManager.default.contents(atPath: "\(root)/\(Self.markerName)"),
            let json = try? JSONValue.parse(data), let number = json["version"]?.numberValue, number >= 2
        else { return version }
        migratedSinceOpen.store(true, ordering: .relaxed)
        return 2
    }

    /// Migrates this cache to format 2 (see above), under the exclusive
    /// lock. The store itself keeps the version it was opened with: open
    /// the cache again to work on it as format 2 (`CacheStore.opening`).
    public func migrate() throws -> Migration {
        let started = ContinuousClock.now
        var result = try withLock(exclusive: true) { () throws -> Migration in
            let migration = CacheMigration(store: self)
            if currentVersion() >= 2 { return try migration.carryOverFormatOneTrees() }
            return try migration.run()
        }
        let elapsed = ContinuousClock.now - started
        result.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return result
    }

    /// Opens a cache as `init` does and, with `migrate`, moves a format-1
    /// cache to format 2 first when new caches are made in format 2 (what
    /// `warm` and `cache put` do). Where the lock cannot keep others out (a
    /// file system whose locks do nothing), the cache stays format 1 and is
    /// written as such; `warning` is told why.
    public static func opening(
        root: String, create: Bool, migrate: Bool, budgets: Budgets = .init(), warning: (String) -> Void = { _ in }
    ) throws -> CacheStore {
        let store = try CacheStore(root: root, create: create, budgets: budgets)
        guard migrate, newCacheVersion >= 2, store.needsMigration else { return store }
        do {
            _ = try store.migrate()
        } catch let error as FPError {
            warning("\(error.description); the cache stays format 1 and is written as such (docs/cache-format.md)")
            return store
        }
        return try CacheStore(root: root, create: create, budgets: budgets)
    }
}
