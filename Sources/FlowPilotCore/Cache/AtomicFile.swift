import Foundation

/// Publishing immutable files so that a reader sees all of one or nothing, even
/// when the writer is killed: the bytes go to an unnamed `O_TMPFILE` in the target
/// directory, which `linkat` gives its final (new, unique) name only once complete.
/// A killed writer leaves nothing behind. Where the system or filesystem lacks
/// `O_TMPFILE` (macOS; `Platform`), a named `.tmp-<pid>-…` file from `mkstemp` and
/// `rename` are used; readers skip such names and `cache verify` reports those of
/// dead processes.
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
    }

    /// `mkdir -p`, one system call when the directory exists (the common case).
    static func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o755) == 0 || errno == EEXIST { return }
        guard errno == ENOENT, path.contains("/") else {
            throw CacheError.io("\(path): \(Errno.describe(errno))")
        }
        try makeDirectory((path as NSString).deletingLastPathComponent)
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw CacheError.io("\(path): \(Errno.describe(errno))")
        }
    }

    static func writeAll(_ fd: Int32, _ data: Data, path: String) throws {
        try data.withUnsafeBytes { raw in
            var off = 0
            while off < raw.count {
                let n = write(fd, raw.baseAddress.map { $0 + off }, raw.count - off)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw CacheError.io("\(path): \(Errno.describe(errno))")
                }
                off += n
            }
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

/// Cache failures that are not findings: I/O and format refusals.
public enum CacheError: Error, CustomStringConvertible, Sendable {
    case io(String)
    case missing(String)
    case newerFormat(String)
    case notACache(String)

    public var description: String {
        switch self {
        case .io(let m), .missing(let m), .newerFormat(let m), .notACache(let m): m
        }
    }

    public var asFPError: FPError {
        switch self {
        case .missing(let m): .inputMissing(m)
        case .newerFormat(let m), .notACache(let m): .invalid([.error("cache-format", "", m)])
        case .io(let m): .cannotWrite(m)
        }
    }
}
