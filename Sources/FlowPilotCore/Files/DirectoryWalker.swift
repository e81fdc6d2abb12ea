import Foundation

/// Directory listing with `openat`/`getdents`/`fstatat`, the same system calls
/// `find -printf '%s %T@'` makes: the cost model the cache's listing commands
/// are held to. FileManager would add an object and a URL per entry.
enum DirectoryWalker {
    struct Item {
        let name: String
        let isDirectory: Bool
        let size: Int64
        let mtime: Date
    }

    /// The entries of `path` (no `.`/`..`), or nil when it is not a readable directory.
    static func list(_ path: String, stat wantStat: Bool = true) -> [Item]? {
        var items: [Item] = []
        return forEach(path, stat: wantStat) { items.append($0) } ? items : nil
    }

    /// Hands each entry of `path` (no `.`/`..`) to `body` as `readdir`
    /// reads it, none kept (a directory of a million names costs one name at
    /// a time); false when it is not a readable directory.
    @discardableResult
    static func forEach(_ path: String, stat wantStat: Bool = true, _ body: (Item) throws -> Void) rethrows -> Bool {
        guard let dir = opendir(path) else { return false }
        defer { closedir(dir) }
        let fd = dirfd(dir)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                // d_name is NUL-terminated within its fixed-size array.
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            var isDir = entry.pointee.d_type == DT_DIR
            var size: Int64 = 0
            var mtime = Date(timeIntervalSince1970: 0)
            if wantStat || entry.pointee.d_type == DT_UNKNOWN {
                var st = stat()
                guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
                isDir = (st.st_mode & S_IFMT) == S_IFDIR
                size = Int64(st.st_size)
                mtime = Platform.modificationTime(st)
            }
            try body(Item(name: name, isDirectory: isDir, size: size, mtime: mtime))
        }
        return true
    }
}
