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
        var last: String.Index?
        var previous: UInt8 = 0
        var plain = true
        for index in path.utf8.indices {
            let byte = path.utf8[index]
            if byte == UInt8(ascii: "/") {
                if previous == byte { plain = false }
                last = index
            }
            previous = byte
        }
        if plain, let last, previous != UInt8(ascii: "/") {
            return last == path.startIndex ? "/" : String(path[..<last])
        }
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
