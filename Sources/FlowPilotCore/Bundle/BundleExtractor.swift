import Crypto
import Foundation

/// Extracts a bundle that has passed validation, writing only inside the target
/// directory and only the bundle's own files: everything lands in a hidden
/// staging directory in the target first, then each file is renamed into place.
/// Before the first rename, every path the bundle writes is checked against
/// what is there: a directory where a file goes, or a file or symbolic link
/// where a directory goes, stops the extract with the target untouched. With
/// `force`, a file of the same name is replaced (a rename, so never half of
/// one); nothing else in the target is touched or removed. Every file and
/// directory is synced before its rename and the directories after, so what
/// `extract` reported survives a power cut.
///
/// Paths are handed to the system as given, never made absolute: a target
/// named relative to a working directory deeper than PATH_MAX works.
public enum BundleExtractor {
    public struct Result: Sendable {
        public let directory: String
        public let files: Int
        public let bytes: Int64
        public let digest: String
    }

    /// - Parameter force: extract into a directory that is not empty; the
    ///   bundle's files replace same-named files in it.
    public static func extract(_ bundle: String, into directory: String, force: Bool) throws -> Result {
        let report = try BundleValidator.validate(bundle)
        guard report.isValid, let digest = report.digest else { throw FPError.invalid(report.findings) }
        let paths = report.entries.map(\.path)
        let created = try prepare(directory, force: force)
        do {
            let expected = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.path, $0.sha256 ?? "") })
            let (files, bytes) = try extractChecked(paths, of: bundle, expected: expected, into: directory)
            if created { try sync(directory: PathName.parent(of: directory)) }
            return Result(directory: directory, files: files, bytes: bytes, digest: digest)
        } catch {
            // A target this extract made goes with it when nothing reached it (rmdir: only if empty).
            if created { rmdir(directory) }
            throw error
        }
    }

    /// The checks, the staging directory (removed whatever happens) and the renames into place.
    private static func extractChecked(
        _ paths: [String], of bundle: String, expected: [String: String], into directory: String
    ) throws -> (files: Int, bytes: Int64) {
        try checkTheWay(for: paths, in: directory)
        let staging = try makeStaging(in: directory)
        defer { removeTree(staging) }
        let (files, bytes) = try writeEntries(of: bundle, into: staging, expected: expected, directory: directory)
        for dir in [staging] + directories(of: paths).map({ PathName.join(staging, $0) }) { try sync(directory: dir) }
        try moveIntoPlace(paths, from: staging, to: directory)
        return (files, bytes)
    }

    /// The target exists as an empty directory (or any directory, with
    /// `force`), or is made. True when it was made. A directory that cannot be
    /// listed is never taken for an empty one.
    private static func prepare(_ directory: String, force: Bool) throws -> Bool {
        var info = stat()
        if stat(directory, &info) != 0 {
            guard errno == ENOENT else { throw FPError.cannotWrite("\(directory): \(Errno.describe(errno))") }
            try makeDirectories(directory)
            return true
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw FPError.cannotWrite("\(directory): exists and is not a directory")
        }
        if !force {
            guard let names = names(in: directory) else {
                throw FPError.cannotWrite("\(directory): cannot list it: \(Errno.describe(errno))")
            }
            if !names.isEmpty { throw FPError.directoryNotEmpty(directory) }
        }
        return false
    }

    /// Every directory the bundle's files sit in (`media`, `flows`), parents first.
    private static func directories(of paths: [String]) -> [String] {
        var seen = Set<String>()
        var out: [String] = []
        for path in paths {
            var parts = path.split(separator: "/").dropLast().map(String.init)
            var prefixes: [String] = []
            while !parts.isEmpty {
                prefixes.insert(parts.joined(separator: "/"), at: 0)
                parts.removeLast()
            }
            for prefix in prefixes where seen.insert(prefix).inserted { out.append(prefix) }
        }
        return out
    }

    /// Nothing in the target stands where the bundle's files or directories go,
    /// but a regular file of a file's name (replaced with `force`; without it
    /// the target is empty).
    private static func checkTheWay(for paths: [String], in directory: String) throws {
        for dir in directories(of: paths) {
            let target = PathName.join(directory, dir)
            var info = stat()
            guard lstat(target, &info) == 0 else { continue }
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw FPError.cannotWrite(
                    "\(target): is in the way of the bundle's directory \(dir)/ and was left as it is")
            }
        }
        for path in paths {
            let target = PathName.join(directory, path)
            var info = stat()
            guard lstat(target, &info) == 0 else { continue }
            let kind = info.st_mode & S_IFMT
            guard kind == S_IFREG || kind == S_IFLNK else {
                throw FPError.cannotWrite("\(target): is in the way of the bundle's file \(path) and was left as it is")
            }
        }
    }

    private static func makeStaging(in directory: String) throws -> String {
        let staging = PathName.join(directory, ".fpctl-extract-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        guard mkdir(staging, 0o755) == 0 else {
            throw FPError.cannotWrite("\(directory): cannot write: \(Errno.describe(errno))")
        }
        return staging
    }

    /// `mkdir -p`, each directory it makes synced into its parent.
    private static func makeDirectories(_ path: String) throws {
        if mkdir(path, 0o755) == 0 { return try sync(directory: PathName.parent(of: path)) }
        let code = errno
        if code == EEXIST { return }
        let parent = PathName.parent(of: path)
        guard code == ENOENT, parent != path, parent != "." else {
            throw FPError.cannotWrite("\(path): cannot create: \(Errno.describe(code))")
        }
        try makeDirectories(parent)
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw FPError.cannotWrite("\(path): cannot create: \(Errno.describe(errno))")
        }
        try sync(directory: parent)
    }

    /// Every entry into `staging`, each checked against the SHA-256 validation saw:
    /// the file could have been swapped between validating and extracting.
    private static func writeEntries(
        of bundle: String, into staging: String, expected: [String: String], directory: String
    )
        throws -> (files: Int, bytes: Int64)
    {
        var files = 0
        var bytes: Int64 = 0
        do {
            let reader = try ZipReader(path: bundle)
            while let entry = try reader.next() {
                // Paths were checked against the canonical pattern: no '..', no absolute, no backslash.
                guard BundlePath.isCanonical(entry.path), let sha = expected[entry.path] else {
                    throw FPError.invalid([.error("zip-structure", entry.path, "entry changed since validation")])
                }
                let (sha256, size) = try writeEntry(reader, to: PathName.join(staging, entry.path))
                guard sha256 == sha else {
                    throw FPError.invalid([
                        .error("manifest-hash-mismatch", entry.path, "content changed since validation")
                    ])
                }
                files += 1
                bytes += size
            }
        } catch let error as FPError {
            throw error
        } catch {
            throw FPError.cannotWrite("\(directory): \(error)")
        }
        return (files, bytes)
    }

    /// The current entry's data into a new file (never through a link): its SHA-256 and size.
    private static func writeEntry(_ reader: ZipReader, to target: String) throws -> (String, Int64) {
        let parent = PathName.parent(of: target)
        if mkdir(parent, 0o755) != 0 && errno != EEXIST {
            try makeDirectories(parent)
        }
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FPError.cannotWrite("\(target): \(Errno.describe(errno))") }
        defer { close(fd) }
        var hasher = SHA256()
        var size: Int64 = 0
        try reader.readData { chunk in
            hasher.update(bufferPointer: chunk)
            if let code = writeAll(fd, chunk) { throw FPError.cannotWrite("\(target): \(Errno.describe(code))") }
            size += Int64(chunk.count)
            return true
        }
        guard Platform.syncData(fd) else { throw FPError.cannotWrite("\(target): \(Errno.describe(errno))") }
        return (Digest.hex(hasher.finalize()), size)
    }

    private static func sync(directory: String) throws {
        guard Platform.syncDirectory(directory) else {
            throw FPError.cannotWrite("\(directory): \(Errno.describe(errno))")
        }
    }

    /// Each of the bundle's files from `staging` to its place in `directory`
    /// (its directories made first), then each directory that changed synced.
    private static func moveIntoPlace(_ paths: [String], from staging: String, to directory: String) throws {
        for dir in directories(of: paths) {
            let target = PathName.join(directory, dir)
            if mkdir(target, 0o755) != 0 && errno != EEXIST {
                throw FPError.cannotWrite("\(target): cannot create: \(Errno.describe(errno))")
            }
        }
        for path in paths {
            let target = PathName.join(directory, path)
            guard rename(PathName.join(staging, path), target) == 0 else {
                throw FPError.cannotWrite("\(target): \(Errno.describe(errno))")
            }
        }
        for dir in [directory] + directories(of: paths).map({ PathName.join(directory, $0) }) {
            try sync(directory: dir)
        }
    }

    /// Removes the staging directory and what is left in it (nothing, after a
    /// whole extract), without following links.
    private static func removeTree(_ path: String) {
        for name in names(in: path) ?? [] {
            let child = PathName.join(path, name)
            var info = stat()
            if lstat(child, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR { removeTree(child) } else { unlink(child) }
        }
        rmdir(path)
    }

    /// The names in a directory but "." and ".."; nil (errno set) when it cannot be listed.
    private static func names(in directory: String) -> [String]? {
        guard let listing = opendir(directory) else { return nil }
        defer { closedir(listing) }
        var names: [String] = []
        while let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
