import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The Linux-only system calls fpctl makes, each with the POSIX path another
/// system (macOS) takes instead (docs/decisions.md, "Portability"). Nothing else in the
/// code tests for the platform.
///
/// `FPCTL_POSIX_FALLBACK=1` makes Linux take the POSIX paths too: a switch for
/// the tests, so the path a Mac would take runs in CI rather than going untested.
public enum Platform {
    static let posixFallback = ProcessInfo.processInfo.environment["FPCTL_POSIX_FALLBACK"] == "1"

    /// Whether the system gives what the Swift runtime reads at start: on
    /// Linux, a mounted /proc (`CommandLine` reads `/proc/self/cmdline`,
    /// Dispatch's thread pool `/proc/TID/stat` and traps without it). Darwin
    /// has no /proc and its runtime needs none.
    public static var runtimeCanStart: Bool {
        #if os(Linux)
            access("/proc/self/stat", R_OK) == 0
        #else
            true
        #endif
    }

    /// Why the runtime cannot start, when `runtimeCanStart` is false.
    public static let runtimeCannotStart =
        "/proc is not mounted: fpctl cannot read its arguments or run its threads without it (mount -t proc proc /proc)"

    /// Whether signal `number` is ignored (SIG_IGN) now, as inherited from
    /// the parent; false when it cannot be asked.
    public static func signalIsIgnored(_ number: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(number, nil, &current) == 0 else { return false }
        #if os(Linux)
            let handler = current.__sigaction_handler.sa_handler
        #else
            let handler = current.__sigaction_u.__sa_handler
        #endif
        return unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    /// close(2), by a name no module's own `close` shadows.
    @discardableResult
    public static func closeDescriptor(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.close(fd)
        #elseif canImport(Darwin)
            Darwin.close(fd)
        #endif
    }

    /// A file in `directory` with no name yet (Linux `O_TMPFILE`); nil where the
    /// system or the filesystem has none, and the caller writes a named
    /// temporary file instead.
    /// `readable`: opened for reading too (a scratch file read back, never named).
    static func openUnnamed(in directory: String, readable: Bool = false) -> Int32? {
        #if os(Linux)
            guard !posixFallback else { return nil }
            // `__O_TMPFILE | O_DIRECTORY`: Glibc's O_TMPFILE macro is not imported into Swift.
            let oTmpFile: Int32 = 0o20200000
            let fd = open(directory, oTmpFile | (readable ? O_RDWR : O_WRONLY) | O_CLOEXEC, readable ? 0o600 : 0o666)
            return fd >= 0 ? fd : nil
        #else
            return nil
        #endif
    }

    /// Gives a file from `openUnnamed` its name; fails (errno set) if the name exists.
    static func link(unnamed fd: Int32, to path: String) -> Bool {
        #if os(Linux)
            return linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0
        #else
            errno = ENOTSUP
            return false
        #endif
    }

    /// Moves the complete file `temporary` to `target` unless `target`
    /// exists (then fails with EEXIST, `temporary` left for the caller), on
    /// any file system: `renameat2(RENAME_NOREPLACE)` (Linux 3.15+; ext4,
    /// XFS, btrfs, tmpfs, NFSv4), else `link` and `unlink` (macOS, and file
    /// systems without the flag), else, where there are no hard links
    /// either (some FUSE and SMB mounts), the name claimed with
    /// `O_CREAT|O_EXCL` and the temporary renamed over it: for that moment
    /// the name holds an empty file, never a torn one, and a claim whose
    /// rename fails is removed. False with errno set.
    static func publishNoReplace(_ temporary: String, to target: String) -> Bool {
        #if os(Linux)
            if !posixFallback, let renameat2 = renameAt2 {
                let renameNoReplace: UInt32 = 1  // RENAME_NOREPLACE
                if renameat2(AT_FDCWD, temporary, AT_FDCWD, target, renameNoReplace) == 0 {
                    return true
                }
                // EINVAL: the file system has no such flag (FUSE through libfuse 2, older NFS); ENOSYS: the kernel.
                guard errno == EINVAL || errno == ENOSYS || errno == ENOTSUP || errno == EOPNOTSUPP else {
                    return false
                }
            }
        #endif
        if Foundation.link(temporary, target) == 0 {
            unlink(temporary)
            return true
        }
        // EPERM, ENOTSUP, EOPNOTSUPP, EMLINK: no hard links here; EEXIST and the rest are answers.
        guard errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP || errno == EMLINK || errno == ENOSYS else {
            return false
        }
        let claim = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard claim >= 0 else { return false }
        close(claim)
        guard rename(temporary, target) == 0 else {
            let failure = errno
            unlink(target)
            errno = failure
            return false
        }
        return true
    }

    #if os(Linux)
        /// glibc's `renameat2` (2.28+), which Swift's Glibc module does not import.
        private static let renameAt2:
            (@convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32)? = {
                guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else { return nil }
                return unsafeBitCast(
                    symbol,
                    to: (@convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32)
                        .self)
            }()
    #endif

    /// The type of the file system `path` is on, as the mount table names it
    /// (`ext4`, `nfs4`, `fuse.sshfs`); nil where it cannot be told.
    public static func fileSystemType(of path: String) -> String? {
        #if os(Linux)
            guard let resolved = realpath(path, nil) else { return nil }
            let target = String(cString: resolved)
            free(resolved)
            guard let table = FileManager.default.contents(atPath: "/proc/self/mounts") else { return nil }
            var best: (length: Int, type: String)?
            for line in String(decoding: table, as: UTF8.self).split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count > 2 else { continue }
                // Spaces and the like in a mount point are octal escapes (\040).
                let point = decodeMountEscapes(String(fields[1]))
                let inside = point == "/" || target == point || target.hasPrefix(point + "/")
                if inside, point.utf8.count >= (best?.length ?? -1) { best = (point.utf8.count, String(fields[2])) }
            }
            return best?.type
        #else
            var info = statfs()
            guard statfs(path, &info) == 0 else { return nil }
            return withUnsafeBytes(of: info.f_fstypename) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        #endif
    }

    /// `\040` and the other octal escapes of /proc/self/mounts, decoded.
    private static func decodeMountEscapes(_ text: String) -> String {
        guard text.contains("\\") else { return text }
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "\\"), i + 3 < bytes.count,
                let value = UInt8(String(decoding: bytes[(i + 1)...(i + 3)], as: UTF8.self), radix: 8)
            {
                out.append(value)
                i += 4
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// This process's start time: clock ticks after boot (field 22 of
    /// `/proc/self/stat`) on Linux, 0 where it cannot be read (another system).
    static let processStartTime: UInt64 = startTime(of: getpid()) ?? 0

    /// The start time of process `pid` on this machine, as `processStartTime` reads it.
    private static func startTime(of pid: Int32) -> UInt64? {
        #if os(Linux)
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else { return nil }
            // The command name (field 2) may hold spaces and ')': the fields after it follow its last ')'.
            guard let close = data.lastIndex(of: UInt8(ascii: ")")) else { return nil }
            let fields = data[(close + 1)...].split(separator: UInt8(ascii: " "))
            // fields[0] is field 3 (the state), so field 22 is fields[19].
            guard fields.count > 19 else { return nil }
            return UInt64(String(decoding: fields[19], as: UTF8.self))
        #else
            return nil
        #endif
    }

    /// Whether process `pid` runs on this machine and, when `startedAt` is
    /// given and can be read, started then (not a later process given the same pid).
    static func processRunning(_ pid: Int32, startedAt: UInt64?) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let startedAt, startedAt != 0, let actual = startTime(of: pid) else { return true }
        return actual == startedAt
    }

    /// Raises the soft limit on open files to the hard one, as Go's runtime
    /// and systemd advise for servers: warm at `--concurrency 1024` holds a
    /// socket per request and, for a moment, a file per entry waiting for its
    /// group commit, past the 1,024 many shells start with. Quietly does
    /// nothing where it cannot.
    public static func raiseOpenFileLimit() {
        var limit = rlimit()
        #if os(Linux)
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(resource, &limit)
    }

    /// The process's file mode creation mask, read without changing it
    /// (Linux's /proc/self/status; elsewhere set and restored at once, before
    /// any file is made). Cache files and directories follow it, so a volume
    /// shared through a group (Kubernetes `fsGroup`, umask 002) is writable
    /// by every uid of the group (docs/cache-format.md, "Many writers").
    static let creationMask: mode_t = {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
            let mask = mode_t(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8)
        {
            return mask
        }
        let mask = umask(0o022)
        umask(mask)
        return mask
    }()

    /// A new file's mode: read and write for whom the umask allows.
    static var fileMode: mode_t { 0o666 & ~creationMask }

    /// The soft limit on open files (`ulimit -n`), after `raiseOpenFileLimit`; nil when unlimited or unknown.
    public static func openFileLimit() -> Int? {
        #if os(Linux)
            softLimit(Int32(RLIMIT_NOFILE.rawValue))
        #else
            softLimit(RLIMIT_NOFILE)
        #endif
    }

    /// Descriptors this process has open now (/proc/self/fd; elsewhere a guess).
    public static func openDescriptorCount() -> Int {
        guard let list = DirectoryWalker.list("/proc/self/fd", stat: false) else { return 16 }
        return list.count
    }

    /// Descriptors free for a run's own work: the limit less those open now
    /// and `reserve` for what the run opens besides (its event loops, output
    /// files, the bundle); nil when there is no limit.
    public static func freeDescriptors(reserve: Int = 24) -> Int? {
        openFileLimit().map { $0 - openDescriptorCount() - reserve }
    }

    /// How many more threads the process may start for a pool, at most
    /// `cap`: half of what `ulimit -u` leaves beside the threads running now,
    /// and half of what `ulimit -v` leaves for their stacks (`ulimit -s`
    /// each). A pool larger than that dies in `pthread_create`; one this size
    /// leaves room for the runtime's own threads.
    static func threadBudget(cap: Int = 32) -> Int {
        var budget = cap
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int? {
            status.split(separator: "\n").first { $0.hasPrefix(name + ":") }.flatMap {
                Int($0.dropFirst(name.count + 1).split(separator: " ").first ?? "")
            }
        }
        if let processes = softLimit(Self.processLimit) {
            budget = min(budget, (processes - (field("Threads") ?? 8)) / 2)
        }
        if let memory = softLimit(Self.addressSpaceLimit) {
            let stack = min(softLimit(Self.stackLimit) ?? (8 << 20), 8 << 20)
            let used = (field("VmSize") ?? 0) * 1024
            budget = min(budget, (memory - used) / max(1, stack) / 2)
        }
        return max(1, budget)
    }

    #if os(Linux)
        private static let processLimit = Int32(__RLIMIT_NPROC.rawValue)
        private static let addressSpaceLimit = Int32(RLIMIT_AS.rawValue)
        private static let stackLimit = Int32(RLIMIT_STACK.rawValue)
    #else
        private static let processLimit = RLIMIT_NPROC
        private static let addressSpaceLimit = RLIMIT_AS
        private static let stackLimit = RLIMIT_STACK
    #endif

    /// A resource's soft limit; nil when unlimited or unknown.
    private static func softLimit(_ resource: Int32) -> Int? {
        var limit = rlimit()
        #if os(Linux)
            guard getrlimit(__rlimit_resource_t(resource), &limit) == 0 else { return nil }
        #else
            guard getrlimit(resource, &limit) == 0 else { return nil }
        #endif
        return limit.rlim_cur == rlim_t.max ? nil : Int(clamping: limit.rlim_cur)
    }

    /// Under `ulimit -v`, keeps malloc to a few arenas: glibc reserves 64 MiB
    /// of address space for each thread's arena (up to 8 per core), which
    /// alone can exhaust a limit of 1 GB, after which no thread can be
    /// started. Does nothing without the limit, or off glibc.
    public static func fitMemoryToAddressSpaceLimit() {
        #if os(Linux)
            // glibc's mallopt (malloc.h, which Swift's Glibc module leaves out); M_ARENA_MAX is -8.
            guard softLimit(addressSpaceLimit) != nil,
                let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt")
            else { return }
            _ = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)(-8, 2)
        #endif
    }

    /// Large buffers a command frees go back to the system at once, for a
    /// command that reads a whole cache (`cache info`, `list`, `verify`,
    /// `prune`, `clear`, `migrate`) in flat memory. glibc serves a buffer of
    /// 128 KiB or more by `mmap` until the first such buffer is freed, then
    /// raises that threshold to the freed size (up to 32 MiB): a segment's
    /// 4 MiB read, a listing's sorted run and its merge buffers then came
    /// from the heap, where what they left behind stayed resident, and `cache
    /// list` of 100,000 entries peaked 14 to 17 MiB above the same at 1,000
    /// (more under load). The threshold is held at `mmapThreshold` instead.
    /// The walk's large buffers are each allocated once and reused
    /// (`WholeFileBuffer`, the survey's prefix table, a listing's slice
    /// buffers), so mapping them costs its page faults once, not once a
    /// segment. Not for `warm`, whose memory is not a walk of the cache and
    /// whose system time counts (#63). Does nothing off glibc.
    public static func returnLargeBuffersToSystem() {
        #if os(Linux)
            // glibc's mallopt (malloc.h, which Swift's Glibc module leaves out); M_MMAP_THRESHOLD is -3.
            // Setting it turns the sliding threshold off (mallopt(3)).
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
            _ = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)(-3, Int32(mmapThreshold))
        #endif
    }

    /// The size from which a whole-cache command's buffers are mapped, and
    /// unmapped when freed: above a listing's batch of rows (about 830 KiB,
    /// one a batch, which the heap reuses), below the buffers a walk
    /// allocates once (a segment, 4 MiB; the survey's table, 2 MiB).
    public static let mmapThreshold = 1 << 20

    /// Puts a file's data and metadata on stable storage: `fsync` on Linux;
    /// on Darwin `F_FULLFSYNC`, since its `fsync` stops at the drive's cache
    /// (falling back to `fsync` where a filesystem refuses it). False with errno set.
    public static func syncData(_ fd: Int32) -> Bool {
        #if canImport(Darwin)
            if fcntl(fd, F_FULLFSYNC) == 0 { return true }
        #endif
        while fsync(fd) != 0 {
            guard errno == EINTR else { return false }
        }
        return true
    }

    /// Starts writing a range of a file to the disk without waiting (Linux
    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`), so the `syncData` that
    /// publishes the file finds little left to write; nothing elsewhere.
    static func startWriteback(_ fd: Int32, offset: Int, count: Int) {
        #if os(Linux)
            _ = syncFileRange?(fd, Int64(offset), Int64(count), 2)  // SYNC_FILE_RANGE_WRITE
        #endif
    }

    #if os(Linux)
        /// glibc's `sync_file_range`, which Swift's Glibc module leaves out (it is a
        /// `_GNU_SOURCE` declaration), looked up once.
        private static let syncFileRange: (@convention(c) (Int32, Int64, Int64, UInt32) -> Int32)? = {
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int64, Int64, UInt32) -> Int32).self)
        }()
    #endif

    /// Puts everything written to the file system `fd` is on (file bytes,
    /// names, directories) on stable storage at once (Linux `syncfs(2)`,
    /// which reports write-back errors since Linux 5.8). False with errno set;
    /// false with ENOTSUP where there is none.
    static func syncFileSystem(_ fd: Int32) -> Bool {
        #if os(Linux)
            guard let syncfs = syncFS else {
                errno = ENOTSUP
                return false
            }
            return syncfs(fd) == 0
        #else
            errno = ENOTSUP
            return false
        #endif
    }

    /// Whether `syncFileSystem` makes the file system `fd` is on durable:
    /// true for the local file systems whose `sync_fs` commits their journal
    /// or log and flushes the device (ext4, XFS, btrfs, F2FS, ZFS), and for
    /// overlayfs (which syncs its upper layer), tmpfs (nothing to sync) on
    /// Linux. False elsewhere: a FUSE file system (the kernel passes `syncfs`
    /// on to virtiofs only), NFS, SMB, anything unknown, and every system but
    /// Linux; there each file and directory is synced on its own.
    /// `FPCTL_COMMIT=fsync` makes it false everywhere (the tests' switch).
    static func honoursSyncFileSystem(_ fd: Int32) -> Bool {
        #if os(Linux)
            guard !forceFsync, syncFS != nil, let fstatfs = fileSystemStatus else { return false }
            // struct statfs begins with f_type, a long, on every 64-bit Linux; 256 bytes hold all of it.
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 8)
            defer { buffer.deallocate() }
            guard fstatfs(fd, buffer) == 0 else { return false }
            return syncfsFileSystems.contains(buffer.load(as: Int.self) & 0xFFFF_FFFF)
        #else
            return false
        #endif
    }

    static let forceFsync = ProcessInfo.processInfo.environment["FPCTL_COMMIT"] == "fsync"

    /// The `f_type`s of the file systems `honoursSyncFileSystem` trusts.
    private static let syncfsFileSystems: Set<Int> = [
        0xEF53,  // ext2/3/4
        0x5846_5342,  // XFS
        0x9123_683E,  // btrfs
        0xF2F5_2010,  // F2FS
        0x2FC1_2FC1,  // ZFS
        0x794C_7630,  // overlayfs
        0x0102_1994,  // tmpfs
    ]

    #if os(Linux)
        /// glibc's `syncfs` (a `_GNU_SOURCE` declaration too), looked up once.
        private static let syncFS: (@convention(c) (Int32) -> Int32)? = {
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syncfs") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
        }()

        /// glibc's `fstatfs`, whose `struct statfs` Swift's Glibc module leaves out.
        private static let fileSystemStatus: (@convention(c) (Int32, UnsafeMutableRawPointer) -> Int32)? = {
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "fstatfs") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int32, UnsafeMutableRawPointer) -> Int32).self)
        }()
    #endif

    /// Puts a directory's entries (names made, renamed or removed in it) on
    /// stable storage. False with errno set. A file system that cannot sync a
    /// directory at all (EINVAL, ENOTSUP), or a directory that may be written
    /// but not opened (EACCES), counts as synced, as PostgreSQL's fsync_fname has it.
    static func syncDirectory(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return errno == EACCES }
        defer { close(fd) }
        return syncData(fd) || errno == EINVAL || errno == ENOTSUP || errno == EOPNOTSUPP
    }

    /// A new, uniquely named file from `template` (ending in `XXXXXX`, as for
    /// `mkstemp`), open for writing; its path, or nil with errno set.
    static func makeTemporary(_ template: String) -> (fd: Int32, path: String)? {
        var bytes = Array(template.utf8CString)
        let fd = bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.map { mkstemp($0) } ?? -1
        }
        guard fd >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let path = bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return (fd, String(decoding: path, as: UTF8.self))
    }

    /// The modification and status-change times a `stat` carries, as (seconds,
    /// nanoseconds): `st_mtim`/`st_ctim` on Linux, `st_mtimespec`/`st_ctimespec` on Darwin.
    static func times(_ st: stat) -> (modified: (Int, Int), changed: (Int, Int)) {
        #if canImport(Darwin)
            let (m, c) = (st.st_mtimespec, st.st_ctimespec)
        #else
            let (m, c) = (st.st_mtim, st.st_ctim)
        #endif
        return ((Int(m.tv_sec), Int(m.tv_nsec)), (Int(c.tv_sec), Int(c.tv_nsec)))
    }

    /// The modification time a `stat` carries (`st_mtim` on Linux, `st_mtimespec` on Darwin).
    static func modificationTime(_ st: stat) -> Date {
        #if canImport(Darwin)
            let t = st.st_mtimespec
        #else
            let t = st.st_mtim
        #endif
        return Date(timeIntervalSince1970: TimeInterval(t.tv_sec) + TimeInterval(t.tv_nsec) / 1e9)
    }
}
