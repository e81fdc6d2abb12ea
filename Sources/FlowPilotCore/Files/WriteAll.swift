#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes every byte of `bytes` to `fd`, going on after short writes and
/// EINTR. Returns the errno that stopped it, or nil when all were written.
/// The one write loop of the code base: the bundle writer, cache files,
/// published outputs and standard output all go through it.
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
    guard let base = bytes.baseAddress else { return nil }
    var offset = 0
    while offset < bytes.count {
        let n = write(fd, base + offset, bytes.count - offset)
        if n < 0 {
            if errno == EINTR { continue }
            return errno
        }
        offset += n
    }
    return nil
}
