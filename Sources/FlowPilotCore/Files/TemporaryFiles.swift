import Foundation
import Synchronization

/// The hidden temporary files of outputs not yet published
/// (`AtomicFile.Output`), so that a process ended by a signal removes them
/// before it goes (fpctl's SIGTERM, SIGINT and SIGHUP): nothing half-written
/// is left beside the output. A `kill -9` or a power cut cannot be caught;
/// what they leave is named `.NAME.tmp-PID-…`, for a person or `cache verify`.
public enum TemporaryFiles {
    private static let paths = Mutex(Set<String>())

    static func add(_ path: String) { _ = paths.withLock { $0.insert(path) } }

    static func remove(_ path: String) { _ = paths.withLock { $0.remove(path) } }

    /// Unlinks every registered file; the caller is about to exit.
    public static func removeAll() {
        let all = paths.withLock { paths -> Set<String> in
            defer { paths = [] }
            return paths
        }
        for path in all { unlink(path) }
    }
}
