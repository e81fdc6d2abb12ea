import Foundation
import Synchronization

/// The cache directory the SDK keeps between launches (docs/cache-format.md):
/// flows keyed by (placement, identity fingerprint) with a last-known-good alias
/// per placement, images keyed by URL, fonts keyed by SHA-256.
///
/// Every file is immutable once published (see `AtomicFile`): a key's directory
/// holds its newest file and, for a moment after a write (or after a writer was
/// killed), older ones, which readers ignore and `prune` removes.
public final class CacheStore: Sendable {
    public static let format = "fpcache"
    public static let formatVersion = 1
    public static let markerName = "fpcache.json"

    public struct Budgets: Sendable {
        public var imageDiskBytes: Int64 = 200 << 20
        public var imageMemoryBytes: Int = 50 << 20
        public var imageTTL: TimeInterval = 7 * 86400
        public init() {}
    }

    public let root: String
    public let budgets: Budgets
    let imageMemory = ImageMemoryCache()
    /// This process's running total of image bytes on disk (nil until first measured).
    let imageTotal = Mutex<Int64?>(nil)

    var flowsDir: String { "\(root)/flows" }
    var aliasesDir: String { "\(root)/aliases" }
    var imagesDir: String { "\(root)/images" }
    var fontsDir: String { "\(root)/fonts" }
    var iconsDir: String { "\(root)/icons" }
    var lockPath: String { "\(root)/.lock" }

    /// Opens a cache directory. `create` makes a missing (or empty) one; otherwise
    /// a missing directory is `FPError.inputMissing` and a directory written by a
    /// newer format is refused, never rewritten.
    public init(root: String, create: Bool = false, budgets: Budgets = .init()) throws {
        self.root = root
        self.budgets = budgets
        var isDir: ObjCBool = false
        let fm = FileManager.default
        if !fm.fileExists(atPath: root, isDirectory: &isDir) {
            guard create else { throw FPError.inputMissing("\(root): no such cache directory") }
            // Synced into its parent (AtomicFile.makeDirectory), like every directory the cache makes.
            do { try AtomicFile.makeDirectory(root) } catch {
                throw FPError.cannotWrite("\(root): cannot create (\(error))")
            }
        } else if !isDir.boolValue {
            throw FPError.invalid([.error("cache-format", root, "not a directory")])
        }
        let marker = "\(root)/\(Self.markerName)"
        if let data = fm.contents(atPath: marker) {
            guard let json = try? JSONValue.parse(data), json["format"]?.stringValue == Self.format,
                let version = json["version"]?.numberValue
            else {
                throw FPError.invalid([.error("cache-format", marker, "not an fpctl cache marker")])
            }
            if version > Double(Self.formatVersion) {
                throw FPError.invalid([
                    .error(
                        "cache-format", root,
                        "cache format version \(CanonicalJSON.formatNumber(version)) is newer than this fpctl reads (\(Self.formatVersion)); upgrade fpctl, the directory was left untouched"
                    )
                ])
            }
        } else {
            // A directory that cannot be listed is not taken for an empty one.
            guard let listing = opendir(root) else {
                throw FPError.cannotWrite("\(root): cannot list it: \(Errno.describe(errno))")
            }
            closedir(listing)
            let contents = (try? fm.contentsOfDirectory(atPath: root)) ?? []
            guard contents.isEmpty else {
                throw FPError.invalid([
                    .error(
                        "cache-format", root, "not an fpctl cache (no \(Self.markerName)); refusing to touch it")
                ])
            }
            guard create else { throw FPError.inputMissing("\(root): empty directory, not a cache yet") }
            let body = CanonicalJSON.prettyData(
                .object(["format": .string(Self.format), "version": .number(Double(Self.formatVersion))]))
            do { try AtomicFile.publish(body, directory: root, name: Self.markerName) } catch {
                // Another process may have created it first; anything else is a real failure.
                guard fm.fileExists(atPath: marker) else { throw error }
            }
        }
    }

    // MARK: Locking

    /// Writers hold the lock shared for the moment of a write; `prune` and
    /// `clear` hold it exclusively while they delete. Readers never lock.
    func withLock<T>(exclusive: Bool, _ body: () throws -> T) throws -> T {
        let lock = try Lock(path: lockPath, exclusive: exclusive)
        defer { lock.release() }
        return try body()
    }

    /// The cache's lock held, for one call (`withLock`) or for a write that
    /// outlives one (an entry waiting for its group commit); `release` once.
    final class Lock: Sendable {
        private let descriptor: Int32

        init(path: String, exclusive: Bool) throws {
            descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw FPError.cannotWrite("\(path): \(Errno.describe(errno))") }
            while flock(descriptor, exclusive ? LOCK_EX : LOCK_SH) != 0 {
                guard errno == EINTR else {
                    let reason = Errno.describe(errno)
                    close(descriptor)
                    throw FPError.cannotWrite("\(path): \(reason)")
                }
            }
        }

        /// Closing the descriptor drops the lock.
        func release() { close(descriptor) }
    }

    /// Files in `directory` that are published entries (not temporaries), newest last.
    static func published(_ directory: String) -> [DirectoryWalker.Item] {
        (DirectoryWalker.list(directory, stat: false) ?? [])
            .filter { !$0.name.hasPrefix(".") && !$0.isDirectory }
            .sorted { $0.name < $1.name }
    }

    /// Removes every published file of a key directory but `keep`.
    static func removeOlder(in directory: String, keeping keep: String) {
        for item in published(directory) where item.name != keep {
            unlink("\(directory)/\(item.name)")
        }
    }
}
