import SystemPackage

/// Path arithmetic on the paths people type, through swift-system's `FilePath`
/// (a lexical, byte-exact path type): the one place fpctl takes a path apart.
/// Foundation's `NSString` path methods trapped on a one-character name
/// (`-o x`), and `URL` turns a path into a URL and back, which a path longer
/// than PATH_MAX or one with bytes that are not UTF-8 does not survive.
public enum PathName {
    /// The directory that holds `path`, as a path to open: "." for a bare name
    /// (`x`, `./x`, `x/`), "/" for a name in the root.
    public static func parent(of path: String) -> String {
        // The common case, a path with no doubled or trailing slash (every
        // path the cache builds): what precedes its last slash, no FilePath.
        var path = path
        let plainParent: String? = path.withUTF8 { bytes in
            var last = -1
            var previous: UInt8 = 0
            for i in bytes.indices {
                let byte = bytes[i]
                if byte == UInt8(ascii: "/") {
                    if previous == byte { return nil }
                    last = i
                }
                previous = byte
            }
            guard last >= 0, previous != UInt8(ascii: "/") else { return nil }
            return last == 0 ? "/" : String(decoding: UnsafeBufferPointer(rebasing: bytes[..<last]), as: UTF8.self)
        }
        if let plainParent { return plainParent }
        var file = FilePath(path)
        guard file.lastComponent != nil else { return path.isEmpty ? "." : file.string }
        file.removeLastComponent()
        return file.isEmpty ? "." : file.string
    }

    /// The last component of `path` (`x` for `a/x` and `a/x/`); "" for "/" or "".
    public static func lastComponent(of path: String) -> String {
        FilePath(path).lastComponent?.string ?? ""
    }

    /// `path` with `component` appended: `a/b`, `/b` for the root, `b` for "".
    public static func join(_ path: String, _ component: String) -> String {
        path.isEmpty ? component : FilePath(path).appending(component).string
    }
}
