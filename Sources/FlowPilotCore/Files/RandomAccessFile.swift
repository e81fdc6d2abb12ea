import Foundation

/// A read-only file read at explicit offsets with `pread`, for structure checks
/// that must not load the whole file.
final class RandomAccessFile {
    let path: String
    let size: Int64
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        // A regular file only: a FIFO is refused, never waited on.
        fd = try InputFile.open(path, "file")
        var st = stat()
        fstat(fd, &st)
        size = Int64(st.st_size)
    }

    deinit { close(fd) }

    /// Up to `count` bytes at `offset` (fewer at the end of the file).
    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        guard count > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = out.withUnsafeMutableBytes { buf in
                pread(fd, buf.baseAddress.map { $0 + done }, count - done, off_t(offset) + off_t(done))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw FPError.inputMissing("\(path): \(Errno.describe(errno))")
            }
            if n == 0 { break }
            done += n
        }
        return Array(out.prefix(done))
    }
}
