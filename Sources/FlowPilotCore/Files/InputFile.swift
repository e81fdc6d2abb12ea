import Foundation

/// Opening a file the user named as input: one line naming the path and the
/// problem (`FPError.inputMissing`, exit 66) whether it is missing, a
/// directory, unreadable, or a FIFO where a seekable file is needed — never a
/// raw Foundation error, and never a wait on a FIFO where a file is needed. A
/// FIFO given as a stream waits for its writer, as `cat` does.
public enum InputFile {
    /// What may stand behind the path.
    public enum Kind: Sendable {
        /// A regular file only (it is sought in, or read twice).
        case regular
        /// Also a pipe or a character device, read once from start to end
        /// (`--identities <(…)`, `/dev/stdin`).
        case stream
    }

    /// An open descriptor for `path`, which the caller closes; `what` names the
    /// input in messages ("identities file", "warm output").
    public static func open(_ path: String, _ what: String, kind: Kind = .regular) throws -> Int32 {
        // A FIFO read as a stream is opened to wait for its writer, as `cat`
        // does: opened without waiting, it reads as empty until a writer
        // comes, and closing it to open it again could drop what a writer
        // that came in between wrote (the pipe's last reader gone).
        var before = stat()
        if kind == .stream, stat(path, &before) == 0, before.st_mode & S_IFMT == S_IFIFO {
            let blocking = Foundation.open(path, O_RDONLY | O_CLOEXEC)
            guard blocking >= 0 else {
                throw FPError.inputMissing("\(path): cannot read the \(what): \(Errno.describe(errno))")
            }
            return blocking
        }
        // O_NONBLOCK so that opening a FIFO where a file is needed never waits
        // for a writer; cleared below.
        let fd = Foundation.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { throw FPError.inputMissing("\(path): no such \(what)") }
            throw FPError.inputMissing("\(path): cannot read the \(what): \(Errno.describe(code))")
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let code = errno
            close(fd)
            throw FPError.inputMissing("\(path): cannot read the \(what): \(Errno.describe(code))")
        }
        switch st.st_mode & S_IFMT {
        case S_IFREG:
            break
        case S_IFDIR:
            close(fd)
            throw FPError.inputMissing("\(path): is a directory, not a file")
        case S_IFCHR where kind == .stream:
            break
        default:
            close(fd)
            throw FPError.inputMissing("\(path): not a regular file (a FIFO or a device cannot be read here)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    /// `open` as a FileHandle that closes the descriptor when it goes.
    public static func handle(_ path: String, _ what: String, kind: Kind = .regular) throws -> FileHandle {
        FileHandle(fileDescriptor: try open(path, what, kind: kind), closeOnDealloc: true)
    }

    /// The whole of a small input (a key, a CA file), at most `limit` bytes:
    /// a regular file, or a pipe or device read to its end
    /// (`--api-key-file <(vault read …)`).
    public static func contents(_ path: String, _ what: String, limit: Int = 1 << 20) throws -> Data {
        let handle = try handle(path, what, kind: .stream)
        let data: Data
        do { data = try handle.read(upToCount: limit + 1) ?? Data() } catch { throw readFailure(path, what, error) }
        guard data.count <= limit else {
            throw FPError.invalid([.error("input-size", path, "the \(what) is larger than \(limit) bytes")])
        }
        return data
    }

    /// What one read(2) gives, up to `limit` bytes: what a pipe holds now, not
    /// `limit` bytes or the end as Foundation's `read(upToCount:)` waits for
    /// (a line written to a pipe is read when it comes). Empty at the end.
    public static func chunk(_ handle: FileHandle, limit: Int = 1 << 16, name: String, _ what: String) throws -> Data {
        var data = Data(count: limit)
        let fd = handle.fileDescriptor
        while true {
            let n = data.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, limit) }
            if n >= 0 { return data.prefix(n) }
            if errno == EINTR { continue }
            throw FPError.inputMissing("\(name): cannot read the \(what): \(Errno.describe(errno))")
        }
    }

    /// A read that failed after the open (EIO, a device gone): the same one line.
    public static func readFailure(_ path: String, _ what: String, _ error: Error) -> FPError {
        let reason = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)?.localizedDescription
        return .inputMissing("\(path): cannot read the \(what): \(reason ?? "\(error)")")
    }
}
