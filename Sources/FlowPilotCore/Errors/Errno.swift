import Foundation

/// An errno as messages name it: the system's text and the symbol, so a
/// failure such as a full disk reads the same in every locale's logs.
public enum Errno {
    public static func describe(_ code: Int32) -> String {
        let names: [Int32: String] = [
            EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EACCES: "EACCES", EEXIST: "EEXIST", ENOTDIR: "ENOTDIR",
            EISDIR: "EISDIR", EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE", EFBIG: "EFBIG", ENOSPC: "ENOSPC",
            EROFS: "EROFS", EDQUOT: "EDQUOT", ENAMETOOLONG: "ENAMETOOLONG", ELOOP: "ELOOP", EXDEV: "EXDEV",
            ENOTEMPTY: "ENOTEMPTY", EBUSY: "EBUSY", ECONNREFUSED: "ECONNREFUSED", ENETUNREACH: "ENETUNREACH",
            EHOSTUNREACH: "EHOSTUNREACH", EADDRNOTAVAIL: "EADDRNOTAVAIL", EAGAIN: "EAGAIN", ENXIO: "ENXIO",
            EBADF: "EBADF", EPIPE: "EPIPE", ESPIPE: "ESPIPE", ENODEV: "ENODEV",
        ]
        let text = String(cString: strerror(code))
        return names[code].map { "\(text) (\($0))" } ?? "\(text) (errno \(code))"
    }
}
