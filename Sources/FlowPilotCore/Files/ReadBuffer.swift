import Foundation

/// One buffer, reused for every read of a loop over many files: a fresh
/// buffer per chunk costs page faults and a cold cache for bytes that are
/// hashed or archived right away. Not shared between threads.
final class ReadBuffer {
    /// Small enough to stay in a core's L2 cache while it is hashed or copied.
    static let defaultSize = 256 << 10

    private let storage: UnsafeMutableRawBufferPointer

    init(size: Int = ReadBuffer.defaultSize) {
        storage = .allocate(byteCount: size, alignment: 64)
    }

    deinit { storage.deallocate() }

    /// Opens `path` for reading without following a symlink in its last
    /// component (a source's files are checked not to be symlinks; this keeps
    /// one swapped in afterwards from being read).
    static func openForReading(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw failure(path) }
        return fd
    }

    /// Reads `fd` (opened from `path`) to its end, calling `body` with each block read.
    func forEachBlock(of fd: Int32, path: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        while true {
            let n = read(fd, storage.baseAddress, storage.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw Self.failure(path)
            }
            if n == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: storage[0..<n]))
        }
    }

    /// errno's failure to open or read `path`: the source is missing or unreadable (exit 66).
    private static func failure(_ path: String) -> FPError {
        FPError.inputMissing("\(path): \(Errno.describe(errno))")
    }
}
