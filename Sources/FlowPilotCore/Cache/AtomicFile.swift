import Foundation

/// Publishing immutable files so that a reader sees all of one or nothing, even
/// when the writer is killed: the bytes go to an unnamed `O_TMPFILE` in the target
/// directory, which `linkat` gives its final (new, unique) name only once complete.
/// A killed writer leaves nothing behind. Where the system or filesystem lacks
/// `O_TMPFILE` (macOS; `Platform`), a named `.tmp-<pid>-…` file from `mkstemp` and
/// `rename` are used; readers skip such names and `cache verify` reports those of
/// dead processes.
///
/// Durable too: the bytes are synced before the file gets its name, and the
/// directory (and any directory made for it, in its parent) after, so a file
/// that `publish` returned for survives a power cut, and a name never points at
/// bytes that did not reach the disk (docs/cache-format.md, "Writing").
enum AtomicFile {
    static let tempPrefix = ".tmp-"

    /// Writes `data` as `directory/name`; fails if the name exists.
    static func publish(_ data: Data, directory: String, name: String, mtime: Date? = nil) throws {
        try makeDirectory(directory)
        let target = "\(directory)/\(name)"
        let fd: Int32
        var tempName: String?
        if let unnamed = Platform.openUnnamed(in: directory) {
            fd = unnamed
        } else {
            guard let (named, path) = Platform.makeTemporary("\(directory)/\(tempPrefix)\(getpid())-XXXXXX") else {
                throw CacheError.io("\(directory): \(Errno.describe(errno))")
            }
            (fd, tempName) = (named, path)
        }
        defer { close(fd) }
        do {
            try writeAll(fd, data, path: target)
            fchmod(fd, 0o644)
            if let mtime { setTimes(fd: fd, mtime: mtime) }
            guard Platform.syncData(fd) else { throw CacheError.io("\(target): \(Errno.describe(errno))") }
            if let tempName {
                guard rename(tempName, target) == 0 else {
                    throw CacheError.io("\(target): \(Errno.describe(errno))")
                }
            } else {
                guard Platform.link(unnamed: fd, to: target) else {
                    throw CacheError.io("\(target): \(Errno.describe(errno))")
                }
            }
        } catch {
            if let tempName { unlink(tempName) }
            throw error
        }
        try syncDirectory(directory)
    }

    /// Syncs a directory whose entries changed (a file published or removed in it).
    static func syncDirectory(_ path: String) throws {
        guard Platform.syncDirectory(path) else { throw CacheError.io("\(path): \(Errno.describe(errno))") }
    }

    /// `mkdir -p`, one system call when the directory exists (the common case).
    /// A directory it makes is synced into its parent, so what is published in
    /// it stays reachable after a power cut.
    static func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o755) == 0 {
            try syncParent(of: path)
            return
        }
        if errno == EEXIST { return }
        guard errno == ENOENT, path.contains("/") else {
            throw CacheError.io("\(path): \(Errno.describe(errno))")
        }
        try makeDirectory((path as NSString).deletingLastPathComponent)
        if mkdir(path, 0o755) == 0 {
            try syncParent(of: path)
        } else if errno != EEXIST {
            throw CacheError.io("\(path): \(Errno.describe(errno))")
        }
    }

    private static func syncParent(of path: String) throws {
        let parent = (path as NSString).deletingLastPathComponent
        try syncDirectory(parent.isEmpty ? "." : parent)
    }

    static func writeAll(_ fd: Int32, _ data: Data, path: String) throws {
        if let code = data.withUnsafeBytes({ FlowPilotCore.writeAll(fd, $0) }) {
            throw CacheError.io("\(path): \(Errno.describe(code))")
        }
    }

    static func setTimes(fd: Int32, mtime: Date) {
        var times = [
            timespec(tv_sec: Int(mtime.timeIntervalSince1970), tv_nsec: 0),
            timespec(tv_sec: Int(mtime.timeIntervalSince1970), tv_nsec: 0),
        ]
        futimens(fd, &times)
    }

    /// Sets a file's modification time (the cache's own access record for images).
    static func touch(_ path: String, _ date: Date) {
        let seconds = date.timeIntervalSince1970
        var times = [
            timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9)),
            timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9)),
        ]
        utimensat(AT_FDCWD, path, &times, 0)
    }
}
