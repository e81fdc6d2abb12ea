import Foundation
import NIOPosix
import Synchronization

/// Who `GroupCommit` tells that a queued file is durable under its name
/// (nil) or could not be made so: once, on one of the committer's threads,
/// which it must not block.
public protocol CommitWaiter: Sendable {
    func committed(_ error: (any Error)?)
}

/// Group commit: many new files made durable together, with the guarantee
/// `AtomicFile.publish` gives one file (docs/cache-format.md, "Durability"):
/// a name never points at bytes that did not reach the disk, and a writer is
/// told its file is written only once file and name are durable.
///
/// A writer stages its file (`stage`: the bytes written to an unnamed
/// `O_TMPFILE`, or a named temporary where there is none, nothing synced) and
/// queues it (`enqueue`). One committer takes everything queued, up to
/// `maxBatch`, and commits it as a group, in one of two ways:
///
/// - where the file system honours `syncfs(2)` (ext4, XFS, btrfs, ...;
///   `Platform.honoursSyncFileSystem`): one `syncfs` makes every file's
///   bytes durable, the files get their names, a second `syncfs` makes the
///   names (and any new directory) durable. Under load the second is the next
///   group's first: one `syncfs` makes the new group's bytes and the previous
///   group's names durable, so a stream of groups costs one `syncfs` each.
///   On a disk whose flush takes 5 ms that is 19x (`warm --concurrency 64`)
///   to 29x (1,024) the rate of one sync per entry (docs/performance.md);
/// - elsewhere (FUSE, NFS, macOS, or `FPCTL_COMMIT=fsync`): each file's bytes
///   synced and then its name given, all files at once across `syncThreads`
///   threads so a journal can take them together; then each distinct
///   directory, and each of those directories' parents (where a new
///   directory's own name lives), synced once.
///
/// Then each writer is told (its `CommitWaiter`), with its own error if its file, its
/// directory or its file system's sync failed. There is no timer: a commit
/// starts as soon as the previous one ends, so the group is whatever arrived
/// meanwhile (one file when writes are sparse, up to `maxBatch` under load),
/// and a file waits at most for the commit in progress, its own, and (by
/// `syncfs`) the one `syncfs` after its own that makes its name durable.
public final class GroupCommit: Sendable {
    /// The process's committer, shared by every store.
    public static let shared = GroupCommit()

    public let maxBatch: Int
    public let syncThreads: Int
    /// The threads, started when first needed: the committer's loop and its
    /// CPU lanes (one per processor), and the fsync fan-out, which only a
    /// file system without `syncfs` (FUSE, NFS, macOS) ever starts. A warm on
    /// ext4 runs `1 + processors` of them, not `syncThreads`.
    private let pools = Mutex<(cpu: NIOThreadPool?, sync: NIOThreadPool?)>((nil, nil))
    private let state = Mutex(State())

    /// Whether each file system (by device) honours `syncfs`, asked once.
    private let honoursSyncfs = Mutex<[UInt64: Bool]>([:])
    /// `syncfsDevice` of the files staged in new directories, by the
    /// directories' parent (a placement's): a key directory made for its
    /// first entry is on its parent's file system, so its file needs no `fstat`.
    private let parentFileSystems = Mutex<[String: UInt64?]>([:])

    private struct State {
        var queue: [Staged] = []
        var committing = false
        var stats = Statistics()
    }

    /// What the committer has done so far in this process.
    public struct Statistics: Sendable {
        public var commits = 0
        public var files = 0
        public var largestGroup = 0
    }

    public var statistics: Statistics { state.withLock { $0.stats } }

    /// The fsync fan-out's threads, at most (docs/cache-format.md, "Group commit", says this number).
    public static let maxSyncThreads = 32

    /// `syncThreads` is lowered to what the process's limits leave room for
    /// (`Platform.threadBudget`: `ulimit -u`, `ulimit -v`).
    /// The most files one commit takes.
    public static let defaultMaxBatch = 1024

    public init(maxBatch: Int = GroupCommit.defaultMaxBatch, syncThreads: Int = GroupCommit.maxSyncThreads) {
        self.maxBatch = max(1, maxBatch)
        self.syncThreads = max(1, min(syncThreads, Platform.threadBudget()))
    }

    /// The committer's loop and its CPU lanes.
    private var cpuPool: NIOThreadPool { pool(\.cpu, threads: 1 + Self.processors) }
    /// The fsync fan-out.
    private var syncPool: NIOThreadPool { pool(\.sync, threads: syncThreads) }

    private func pool(
        _ which: WritableKeyPath<(cpu: NIOThreadPool?, sync: NIOThreadPool?), NIOThreadPool?>, threads: Int
    ) -> NIOThreadPool {
        pools.withLock { pools in
            if let pool = pools[keyPath: which] { return pool }
            let pool = NIOThreadPool(numberOfThreads: threads)
            pool.start()
            pools[keyPath: which] = pool
            return pool
        }
    }

    /// A file written, neither synced nor named yet.
    public final class Staged: @unchecked Sendable {
        let file: AtomicFile.Unnamed
        let directory: String
        let target: String
        /// The file system's device when it honours `syncfs` (`Platform.honoursSyncFileSystem`).
        let fileSystem: UInt64?
        /// Whether `directory` was made for this file (it then held nothing
        /// else when the file was written).
        let madeDirectory: Bool
        // Set by the committer, which alone touches a staged file once queued.
        fileprivate var waiter: (any CommitWaiter)?
        fileprivate var error: (any Error)?

        fileprivate init(
            file: AtomicFile.Unnamed, directory: String, target: String, fileSystem: UInt64?, madeDirectory: Bool
        ) {
            (self.file, self.directory, self.target, self.fileSystem) = (file, directory, target, fileSystem)
            self.madeDirectory = madeDirectory
        }

        /// Closes the file (and removes a named temporary that never got its name).
        fileprivate func release(named: Bool) {
            close(file.descriptor)
            if !named, let temporaryPath = file.temporaryPath { unlink(temporaryPath) }
        }
    }

    /// Writes `data` as the future `directory/name` without syncing anything.
    /// `directory` may be new: it is made here and its name synced with the
    /// group (deeper missing directories are made and synced at once, as
    /// `AtomicFile.makeDirectory` does: they are rare). Blocks; call it off
    /// the threads Swift's concurrency runs on.
    public func stage(_ data: Data, directory: String, name: String, mtime: Date? = nil) throws -> Staged {
        let made = try AtomicFile.makeDirectory(directory, syncingParent: false)
        let target = "\(directory)/\(name)"
        let file = try AtomicFile.writeUnnamed(data, directory: directory, target: target, mtime: mtime)
        // A directory made here is on its parent's file system: known once a file of a sibling was staged.
        let parent = made ? PathName.parent(of: directory) : nil
        let fileSystem: UInt64?
        if let parent, let known = parentFileSystems.withLock({ $0[parent] }) {
            fileSystem = known
        } else {
            fileSystem = syncfsDevice(of: file.descriptor)
            if let parent {
                parentFileSystems.withLock { known in
                    if known.count >= 1024 { known = [:] }
                    known[parent] = fileSystem
                }
            }
        }
        return Staged(
            file: file, directory: directory, target: target, fileSystem: fileSystem, madeDirectory: made)
    }

    /// The device of the file system `fd` is on when that file system honours `syncfs`, else nil.
    private func syncfsDevice(of fd: Int32) -> UInt64? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        let device = UInt64(info.st_dev)
        let honours = honoursSyncfs.withLock { known in
            if let answer = known[device] { return answer }
            let answer = Platform.honoursSyncFileSystem(fd)
            known[device] = answer
            return answer
        }
        return honours ? device : nil
    }

    /// Queues a staged file for the next commit. `waiter` is told once, on
    /// one of the committer's threads, when the file is durable under its
    /// name (nil) or could not be made so (the error; the name is then absent
    /// or, if only its directory's sync failed, not known to be durable).
    public func enqueue(_ staged: Staged, waiter: any CommitWaiter) {
        enqueue([(staged, waiter)])
    }

    /// Queues several staged files at once: one writer's batch, committed
    /// together unless the group fills.
    public func enqueue(_ files: [(Staged, any CommitWaiter)]) {
        guard !files.isEmpty else { return }
        for (staged, waiter) in files { staged.waiter = waiter }
        let start = state.withLock { state -> Bool in
            state.queue.append(contentsOf: files.map(\.0))
            defer { state.committing = true }
            return !state.committing
        }
        if start { cpuPool.submit { _ in self.commitLoop() } }
    }

    /// Stages and commits one file, returning once it is durable.
    public func publish(_ data: Data, directory: String, name: String, mtime: Date? = nil) async throws {
        let staged = try await BlockingIO.run { try self.stage(data, directory: directory, name: name, mtime: mtime) }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            enqueue(staged, waiter: Resumption(continuation: continuation))
        }
    }

    /// `publish`'s waiter: the awaiting task resumed.
    private struct Resumption: CommitWaiter {
        let continuation: CheckedContinuation<Void, any Error>
        func committed(_ error: (any Error)?) {
            if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
    }

    /// A synchronous writer's entries in flight (`cache put`): at most
    /// `limit` staged and not yet durable (each holds a descriptor until its
    /// commit), and the first failure among them.
    public final class Outstanding: CommitWaiter {
        private let slots: DispatchSemaphore
        private let group = DispatchGroup()
        private let firstError = Mutex<(any Error)?>(nil)

        public init(limit: Int = 1024) { slots = DispatchSemaphore(value: limit) }

        /// Waits for a free slot; pair with `committed` (its waiter, for
        /// `GroupCommit.enqueue`), or `cancel` if staging failed.
        public func begin() {
            slots.wait()
            group.enter()
        }

        /// One entry begun is durable (nil) or failed.
        public func committed(_ error: (any Error)?) {
            if let error { firstError.withLock { $0 = $0 ?? error } }
            group.leave()
            slots.signal()
        }

        public func cancel() { committed(nil) }

        /// Waits until every entry begun is durable or failed; throws the first failure.
        public func wait() throws {
            group.wait()
            if let error = firstError.withLock({ $0 }) { throw error }
        }
    }

    /// Takes groups until the queue is empty. Where `syncfs` is honoured the
    /// commits overlap: one `syncfs` makes durable the bytes of the group just
    /// taken and the names given to the group before it; that earlier group
    /// is then told, this one named. Under load that is one `syncfs` a group;
    /// when nothing more arrives, one more for the last group's names.
    private func commitLoop() {
        var named: [Staged] = []
        while true {
            let group = state.withLock { state -> [Staged] in
                let group = Array(state.queue.prefix(maxBatch))
                state.queue.removeFirst(group.count)
                if group.isEmpty && named.isEmpty { state.committing = false }
                return group
            }
            if group.isEmpty && named.isEmpty { return }
            let whole = group.filter { $0.fileSystem != nil }
            let single = group.filter { $0.fileSystem == nil }
            if !whole.isEmpty || !named.isEmpty {
                syncFileSystems(bytesOf: whole, namesOf: named)
                tell(named)
                fanOut(whole.count, lanes: cpuLanes(whole.count)) { index in
                    let file = whole[index]
                    if file.error == nil { self.name(file) }
                }
                named = whole
            }
            if !single.isEmpty {
                commitByFsync(single)
                tell(single)
            }
        }
    }

    /// One `syncfs` for each file system of `files` and `names`: the files'
    /// bytes and the names' entries durable, or each told why not.
    private func syncFileSystems(bytesOf files: [Staged], namesOf names: [Staged]) {
        for (_, staged) in Dictionary(grouping: names + files, by: { $0.fileSystem ?? 0 }) {
            let alive = staged.filter { $0.error == nil }
            guard let first = alive.first, !Platform.syncFileSystem(first.file.descriptor) else { continue }
            let reason = Errno.describe(errno)
            for file in alive { file.error = Self.syncFailure(file, reason) }
        }
    }

    /// Elsewhere: each file's bytes synced before its name is given, then
    /// each distinct directory and its parent synced once.
    private func commitByFsync(_ group: [Staged]) {
        // 1. Bytes, then names.
        fanOut(group.count) { index in
            let file = group[index]
            guard Platform.syncData(file.file.descriptor) else {
                file.error = FPError.cannotWrite("\(file.target): \(Errno.describe(errno))")
                return
            }
            self.name(file)
        }
        // 2. Each directory once, and its parent, where a new directory's name is.
        var directories: [String: [Staged]] = [:]
        var parents = Set<String>()
        for file in group where file.error == nil {
            directories[file.directory, default: []].append(file)
            parents.insert(PathName.parent(of: file.directory))
        }
        let toSync = Array(Set(directories.keys).union(parents))
        let failures = Mutex<[String: String]>([:])
        fanOut(toSync.count) { index in
            if !Platform.syncDirectory(toSync[index]) {
                let reason = Errno.describe(errno)
                failures.withLock { $0[toSync[index]] = reason }
            }
        }
        for (directory, reason) in failures.withLock({ $0 }) {
            // A directory of the group's files, or a parent of such directories.
            let affected =
                directories[directory]
                ?? directories.filter { PathName.parent(of: $0.key) == directory }.flatMap(\.value)
            for file in affected where file.error == nil {
                file.error = FPError.cannotWrite("\(directory): \(reason)")
            }
        }
    }

    private static func syncFailure(_ file: Staged, _ reason: String) -> FPError {
        FPError.cannotWrite("\(file.directory): syncing its file system: \(reason)")
    }

    /// Gives a file whose bytes are durable its name.
    private func name(_ file: Staged) {
        if !AtomicFile.giveName(file.file, to: file.target) {
            file.error = FPError.cannotWrite("\(file.target): \(Errno.describe(errno))")
        }
    }

    private func tell(_ group: [Staged]) {
        guard !group.isEmpty else { return }
        state.withLock { state in
            state.stats.commits += 1
            state.stats.files += group.count
            state.stats.largestGroup = max(state.stats.largestGroup, group.count)
        }
        fanOut(group.count, lanes: cpuLanes(group.count)) { index in
            let file = group[index]
            file.release(named: file.error == nil)
            file.waiter?.committed(file.error)
            file.waiter = nil
        }
    }

    /// Lanes for work that keeps a CPU busy rather than waiting for the disk
    /// (naming files whose bytes are durable, closing them and telling their
    /// writers): no more lanes than CPUs, and a lane only for every 64 files,
    /// since waking a thread costs more than it saves for a few (with 32
    /// lanes, the wakes were most of warm's context switches).
    private func cpuLanes(_ count: Int) -> Int {
        max(1, min(Self.processors, count / 64))
    }

    private static let processors = ProcessInfo.processInfo.activeProcessorCount

    /// Runs `body` for 0..<count across `lanes` of the sync threads (by
    /// default all of them: each file's fsync waits for the disk) and waits
    /// for all.
    private func fanOut(_ count: Int, lanes: Int? = nil, _ body: @escaping @Sendable (Int) -> Void) {
        let lanes = min(lanes ?? syncThreads, count)
        guard lanes > 1 else {
            for index in 0..<count { body(index) }
            return
        }
        // CPU lanes on the committer's pool (it has one per processor beside the loop); syncs on their own.
        let pool = lanes <= Self.processors ? cpuPool : syncPool
        let done = DispatchGroup()
        for lane in 0..<lanes {
            done.enter()
            pool.submit { _ in
                for index in stride(from: lane, to: count, by: lanes) { body(index) }
                done.leave()
            }
        }
        done.wait()
    }
}
