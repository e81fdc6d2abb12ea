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
public enum AtomicFile {
    static let tempPrefix = ".tmp-"

    /// `publish(noReplace: true)` found its name taken (by another writer's file, which is kept).
    struct NameTaken: Error, CustomStringConvertible {
        let path: String
        var description: String { "\(path): \(Errno.describe(EEXIST))" }
    }

    /// A named temporary's name up to its random part: `.tmp-<pid>-<start>-`,
    /// the writer's pid and its start time (`Platform.processStartTime`), so
    /// that a pid used again by a later process is not taken for the writer.
    static let temporaryStem = "\(tempPrefix)\(getpid())-\(Platform.processStartTime)-"

    /// Writes `data` as `directory/name`; fails if the name exists. Cache
    /// names are new by construction (their stamps), so where there is no
    /// `O_TMPFILE` the named temporary is renamed, which would replace; with
    /// `noReplace` (the marker, the one name two writers share) it never does.
    /// `faults` prefixes the `FaultHook` points of each step (`-written`, `-synced`, `-named`).
    static func publish(
        _ data: Data, directory: String, name: String, mtime: Date? = nil, noReplace: Bool = false,
        faults: String? = nil
    ) throws {
        try makeDirectory(directory)
        let target = "\(directory)/\(name)"
        let file = try writeUnnamed(data, directory: directory, target: target, mtime: mtime)
        do {
            if let faults { FaultHook.reach(faults + "-written") }
            guard Platform.syncData(file.descriptor) else {
                throw FPError.cannotWrite("\(target): \(Errno.describe(errno))")
            }
            if let faults { FaultHook.reach(faults + "-synced") }
            guard giveName(file, to: target, noReplace: noReplace) else {
                let failure = errno
                if noReplace && failure == EEXIST { throw NameTaken(path: target) }
                throw FPError.cannotWrite("\(target): \(Errno.describe(failure))")
            }
            if let faults { FaultHook.reach(faults + "-named") }
        } catch {
            // Closed before its name goes: NFS and FUSE rename a file unlinked while it is open
            // (`.nfs…`, `.fuse_hidden…`), a name another process listing the directory would see
            // (one starting the same new cache on another node took it for a foreign file).
            close(file.descriptor)
            if let temporaryPath = file.temporaryPath { unlink(temporaryPath) }
            throw error
        }
        close(file.descriptor)
        try syncDirectory(directory)
    }

    /// A file written but not yet named: an unnamed `O_TMPFILE`, or where
    /// there is none a named temporary (`temporaryPath`).
    struct Unnamed: Sendable {
        let descriptor: Int32
        let temporaryPath: String?
    }

    /// Writes `data` (mode 0666 less the umask, `mtime` if given) to a new file in
    /// `directory` that has no name yet; nothing is synced. On failure
    /// nothing is left behind. `target` names the file in errors.
    static func writeUnnamed(_ data: Data, directory: String, target: String, mtime: Date?) throws -> Unnamed {
        let file = try openUnnamed(directory: directory, target: target)
        do {
            try writeAll(file.descriptor, data, path: target)
            if let mtime { setTimes(fd: file.descriptor, mtime: mtime) }
        } catch {
            close(file.descriptor)
            if let temporaryPath = file.temporaryPath { unlink(temporaryPath) }
            throw error
        }
        return file
    }

    /// A new, empty file in `directory` with no name yet (an unnamed
    /// `O_TMPFILE`, or a named temporary where there is none), mode 0666 less
    /// the umask; it may be given a name in another directory of the same
    /// file system. `target` names the file in errors.
    static func openUnnamed(directory: String, target: String) throws -> Unnamed {
        if let fd = Platform.openUnnamed(in: directory) { return Unnamed(descriptor: fd, temporaryPath: nil) }
        guard let (fd, path) = Platform.makeTemporary("\(directory)/\(temporaryStem)XXXXXX") else {
            throw FPError.cannotWrite("\(directory): \(Errno.describe(errno))")
        }
        // Held until the descriptor closes: how any process, on any node, tells
        // a live writer's temporary from a dead one's (CacheStore.writerAlive).
        _ = flock(fd, LOCK_EX | LOCK_NB)
        // mkstemp's file is 0600.
        fchmod(fd, Platform.fileMode)
        return Unnamed(descriptor: fd, temporaryPath: path)
    }

    /// Gives a file from `writeUnnamed` its name (`linkat`, or `rename` of
    /// the named temporary, which replaces an existing name unless
    /// `noReplace`); false with errno set.
    static func giveName(_ file: Unnamed, to target: String, noReplace: Bool = false) -> Bool {
        if let temporaryPath = file.temporaryPath {
            if noReplace { return Platform.publishNoReplace(temporaryPath, to: target) }
            return rename(temporaryPath, target) == 0
        }
        return Platform.link(unnamed: file.descriptor, to: target)
    }

    /// Syncs a directory whose entries changed (a file published or removed in it).
    static func syncDirectory(_ path: String) throws {
        guard Platform.syncDirectory(path) else { throw FPError.cannotWrite("\(path): \(Errno.describe(errno))") }
    }

    /// `mkdir -p` (mode 0777 less the umask), one system call when the directory exists (the common case).
    /// A directory it makes is synced into its parent, so what is published in
    /// it stays reachable after a power cut; with `syncingParent: false` the
    /// last one is not (the caller syncs its parent later: a group commit),
    /// while any missing ancestors still are.
    /// Returns whether `path` was made here (false: it was already there).
    @discardableResult
    static func makeDirectory(_ path: String, syncingParent: Bool = true) throws -> Bool {
        if mkdir(path, 0o777) == 0 {
            if syncingParent { try syncParent(of: path) }
            return true
        }
        if errno == EEXIST { return false }
        guard errno == ENOENT, path.contains("/") else {
            throw FPError.cannotWrite("\(path): \(Errno.describe(errno))")
        }
        try makeDirectory(PathName.parent(of: path))
        if mkdir(path, 0o777) == 0 {
            if syncingParent { try syncParent(of: path) }
            return true
        } else if errno != EEXIST {
            throw FPError.cannotWrite("\(path): \(Errno.describe(errno))")
        }
        return false
    }

    private static func syncParent(of path: String) throws {
        try syncDirectory(PathName.parent(of: path))
    }

    static func writeAll(_ fd: Int32, _ data: Data, path: String) throws {
        if let code = data.withUnsafeBytes({ FlowPilotCore.writeAll(fd, $0) }) {
            throw FPError.cannotWrite("\(path): \(Errno.describe(code))")
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

extension AtomicFile {
    /// Writes `bytes` to `destination` whole (a temporary file, synced, then
    /// moved into place), or leaves nothing behind.
    public static func write(_ bytes: some ContiguousBytes, to destination: String, overwrite: Bool) throws {
        let out = try Output(destination: destination, overwrite: overwrite)
        try out.write(bytes)
        try out.commit()
    }

    /// An output file that appears whole or not at all, opened once and
    /// written as a stream (a bundle entry by entry, a page or the metrics at
    /// the end): bytes go to a hidden temporary file in the destination's
    /// directory, which `commit` syncs to stable storage, moves into place and
    /// then syncs the directory, so an output fpctl said it wrote survives a
    /// power cut (git's `core.fsync`, Go's renameio). Dropped without `commit`,
    /// it closes and removes the temporary file; a signal that ends the
    /// process removes it too (`TemporaryFiles`).
    ///
    /// What is already at the destination decides the rest:
    /// - a symbolic link is followed to the file it names (a dangling one to
    ///   the file it would name), and that file is replaced, never the link;
    /// - a character device or a FIFO (`/dev/null`, `/dev/stdout`, a named
    ///   pipe) is written through, as a shell's `>` would: the descriptor is
    ///   the destination itself, and nothing is renamed over it or removed;
    /// - a directory or any other kind of file is refused (cannot write);
    /// - a regular file is replaced only with `overwrite`;
    /// - "-" and "" are refused as usage errors: no file is named "-".
    public final class Output {
        public let destination: String
        /// Where the bytes go until `commit`: the temporary file, or the
        /// device or FIFO itself.
        public let descriptor: Int32
        /// The destination is a device or a FIFO, written in place.
        public let writesThrough: Bool
        private let temporaryPath: String
        private let target: String
        private let overwrite: Bool
        private let mode: mode_t
        private var state = State.open

        private enum State { case open, committed, closed }

        /// `mode` is the published file's (0600 for a private key: the
        /// temporary file has it from the start).
        public init(destination: String, overwrite: Bool, mode: mode_t = 0o644) throws {
            self.destination = destination
            self.overwrite = overwrite
            self.mode = mode
            // "-" is standard output to most tools: never a file named "-".
            guard destination != "-" else {
                throw FPError.usage("-: standard output is not a file here; name the output file")
            }
            guard !destination.isEmpty else { throw FPError.usage("the output file's name is empty") }
            // "x/" names a directory: refused before any work, not when it is published.
            guard !destination.hasSuffix("/") else {
                throw FPError.usage("\(destination): ends in '/', which names a directory; give the file's name")
            }
            target = try Self.followLinks(destination)
            var info = stat()
            if stat(target, &info) == 0 {
                switch info.st_mode & S_IFMT {
                case S_IFREG:
                    if !overwrite { throw FPError.outputExists(destination) }
                    writesThrough = false
                case S_IFCHR, S_IFIFO:
                    writesThrough = true
                case S_IFDIR:
                    throw FPError.cannotWrite("\(destination): is a directory")
                default:
                    throw FPError.cannotWrite(
                        "\(destination): is neither a regular file, a character device nor a FIFO")
                }
            } else if errno == ENOENT {
                writesThrough = false
            } else {
                throw FPError.cannotWrite("\(destination): \(Errno.describe(errno))")
            }
            if writesThrough {
                // A FIFO waits here for its reader, as a shell's `>` does.
                temporaryPath = target
                descriptor = open(target, O_WRONLY | O_CLOEXEC)
                guard descriptor >= 0 else { throw FPError.cannotWrite("\(destination): \(Errno.describe(errno))") }
                return
            }
            let dir = PathName.parent(of: target)
            var dirInfo = stat()
            guard stat(dir, &dirInfo) == 0, dirInfo.st_mode & S_IFMT == S_IFDIR else {
                throw FPError.cannotWrite("\(destination): directory \(dir) does not exist")
            }
            temporaryPath = PathName.join(dir, Self.temporaryName(for: target))
            // Registered before it exists: a signal between the two finds nothing to remove, not a
            // file it does not know of (the other order left one behind, now and then).
            TemporaryFiles.add(temporaryPath)
            descriptor = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
            guard descriptor >= 0 else {
                TemporaryFiles.remove(temporaryPath)
                throw FPError.cannotWrite(
                    "\(destination): cannot create a file in \(dir): \(Errno.describe(errno))")
            }
        }

        /// The hidden name the bytes are written under until `commit`:
        /// `.NAME.tmp-PID-RANDOM`, NAME cut to its first 200 bytes (whole
        /// Unicode scalars, so still UTF-8) so that a 255-byte name stays
        /// within NAME_MAX.
        static func temporaryName(for target: String) -> String {
            var base = String.UnicodeScalarView()
            var bytes = 0
            for scalar in PathName.lastComponent(of: target).unicodeScalars {
                bytes += UTF8.width(scalar)
                if bytes > 200 { break }
                base.append(scalar)
            }
            return ".\(String(base)).tmp-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        }

        /// The path a chain of symbolic links ends at (at most 40 links, as the
        /// kernel allows); a relative link is read from its own directory.
        static func followLinks(_ path: String) throws -> String {
            var current = path
            for _ in 0..<40 {
                var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
                let n = readlink(current, &buffer, buffer.count - 1)
                if n < 0 {
                    if errno == EINVAL || errno == ENOENT { return current }  // not a link, or nothing there
                    throw FPError.cannotWrite("\(path): \(Errno.describe(errno))")
                }
                let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                current = link.hasPrefix("/") ? link : PathName.join(PathName.parent(of: current), link)
            }
            throw FPError.cannotWrite("\(path): \(Errno.describe(ELOOP))")
        }

        /// Appends `bytes` after everything written before.
        public func write(_ bytes: some ContiguousBytes) throws {
            precondition(state == .open, "AtomicFile.Output written after commit")
            if let code = bytes.withUnsafeBytes({ FlowPilotCore.writeAll(descriptor, $0) }) {
                throw FPError.cannotWrite("\(destination): \(Errno.describe(code))")
            }
        }

        /// Syncs the finished file and moves it into place (a device or FIFO
        /// is only closed). Without `overwrite` this fails, rather than
        /// replaces, when the destination appeared in the meantime.
        public func commit() throws {
            precondition(state == .open, "AtomicFile.Output committed twice")
            state = .closed
            if writesThrough {
                guard close(descriptor) == 0 else {
                    throw FPError.cannotWrite("\(destination): \(Errno.describe(errno))")
                }
                state = .committed
                return
            }
            defer { TemporaryFiles.remove(temporaryPath) }
            // A fixed mode, whatever the umask, so reproducible builds stay reproducible on disk too.
            fchmod(descriptor, mode)
            let synced = Platform.syncData(descriptor) ? nil : errno
            let closed = close(descriptor) == 0 ? nil : errno
            if let failure = synced ?? closed {
                unlink(temporaryPath)
                throw FPError.cannotWrite("\(destination): \(Errno.describe(failure))")
            }
            if overwrite {
                guard rename(temporaryPath, target) == 0 else {
                    let reason = Errno.describe(errno)
                    unlink(temporaryPath)
                    throw FPError.cannotWrite("\(destination): \(reason)")
                }
            } else {
                // No-clobber on any file system, hard links or not (Platform.publishNoReplace).
                let failure = Platform.publishNoReplace(temporaryPath, to: target) ? nil : errno
                if failure != nil { unlink(temporaryPath) }
                if failure == EEXIST { throw FPError.outputExists(destination) }
                if let failure { throw FPError.cannotWrite("\(destination): \(Errno.describe(failure))") }
            }
            state = .committed
            try AtomicFile.syncDirectory(PathName.parent(of: target))
        }

        deinit {
            guard state == .open else { return }
            close(descriptor)
            if !writesThrough {
                unlink(temporaryPath)
                TemporaryFiles.remove(temporaryPath)
            }
        }
    }
}
