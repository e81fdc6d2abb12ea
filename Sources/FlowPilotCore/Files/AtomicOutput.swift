import Foundation

/// An output file that appears whole or not at all: bytes go to a hidden
/// temporary file in the destination's directory, which `commit` syncs to
/// stable storage, moves into place and then syncs the directory, so an output
/// fpctl said it wrote survives a power cut (git's `core.fsync`, Go's renameio).
/// Dropped without `commit`, it removes the temporary file.
public final class AtomicOutput {
    public let destination: String
    public let temporaryPath: String
    private var committed = false

    public init(destination: String, overwrite: Bool) throws {
        self.destination = destination
        let url = URL(fileURLWithPath: destination)
        let dir = url.deletingLastPathComponent().path
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
            throw FPError.cannotWrite("\(destination): directory \(dir) does not exist")
        }
        if !overwrite, FileManager.default.fileExists(atPath: destination) {
            throw FPError.outputExists(destination)
        }
        temporaryPath = "\(dir)/.\(url.lastPathComponent).tmp-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw FPError.cannotWrite(
                "\(destination): cannot create a file in \(dir): \(Errno.describe(errno))")
        }
        close(fd)
        self.overwrite = overwrite
    }

    private let overwrite: Bool

    /// Writes `bytes` to `destination` whole (a temporary file, synced, then
    /// moved into place), or leaves nothing behind.
    public static func write(_ bytes: some ContiguousBytes, to destination: String, overwrite: Bool) throws {
        let out = try AtomicOutput(destination: destination, overwrite: overwrite)
        try out.write(bytes)
        try out.commit()
    }

    /// Puts `bytes` in the temporary file, replacing what it held.
    public func write(_ bytes: some ContiguousBytes) throws {
        let fd = open(temporaryPath, O_WRONLY | O_TRUNC | O_CLOEXEC)
        guard fd >= 0 else { throw FPError.cannotWrite("\(destination): \(Errno.describe(errno))") }
        defer { close(fd) }
        if let code = bytes.withUnsafeBytes({ writeAll(fd, $0) }) {
            throw FPError.cannotWrite("\(destination): \(Errno.describe(code))")
        }
    }

    /// Moves the finished file into place. Without `overwrite` this fails, rather
    /// than replaces, when the destination appeared in the meantime.
    public func commit() throws {
        // A fixed mode, whatever the umask, so reproducible builds stay reproducible on disk too.
        chmod(temporaryPath, 0o644)
        let fd = open(temporaryPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0, Platform.syncData(fd) else {
            let reason = Errno.describe(errno)
            if fd >= 0 { close(fd) }
            throw FPError.cannotWrite("\(destination): \(reason)")
        }
        close(fd)
        if overwrite {
            guard rename(temporaryPath, destination) == 0 else {
                throw FPError.cannotWrite("\(destination): \(Errno.describe(errno))")
            }
        } else {
            guard link(temporaryPath, destination) == 0 else {
                if errno == EEXIST { throw FPError.outputExists(destination) }
                throw FPError.cannotWrite("\(destination): \(Errno.describe(errno))")
            }
            unlink(temporaryPath)
        }
        committed = true
        let dir = (destination as NSString).deletingLastPathComponent
        guard Platform.syncDirectory(dir.isEmpty ? "." : dir) else {
            throw FPError.cannotWrite("\(destination): \(Errno.describe(errno))")
        }
    }

    deinit {
        if !committed { unlink(temporaryPath) }
    }
}
