import Foundation

/// The JSON outputs of one run's attempts under `warm --output-dir DIR`, as a
/// Kubernetes Indexed Job retries an index or a CI job is re-run: each attempt
/// writes a new file, `DIR/RUN_ID/PART.attempt-NNN.json` (PART `shard-K-of-N`,
/// or `all` for an unsharded run; NNN counting from 001), and resumes from every
/// earlier attempt of the same part, so a retried pod needs no script to find
/// the file to resume. docs/fleet.md, "A Kubernetes Indexed Job".
public struct WarmAttempts: Sendable {
    /// This attempt's file, created empty (and its name synced) by `claim`.
    public let path: String
    public let number: Int
    /// The descriptor of `path`, open for writing.
    public let descriptor: Int32

    /// A run id names a directory: letters, digits, `.`, `_` and `-`, not
    /// starting with a dot, at most 200 bytes (Kubernetes' names fit). What
    /// is wrong with `runID`, or nil when it can name one.
    public static func runIDProblem(_ runID: String) -> String? {
        let allowed = runID.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0))
        }
        guard allowed, !runID.isEmpty, !runID.hasPrefix("."), runID.utf8.count <= 200 else {
            return "--run-id \(runID): with --output-dir the run id names a directory: "
                + "use letters, digits, '.', '_' and '-' (not a leading '.'), at most 200"
        }
        return nil
    }

    /// `shard-2-of-4` or `all`.
    public static func part(_ shard: Shard?) -> String {
        shard.map { "shard-\($0.index)-of-\($0.count)" } ?? "all"
    }

    /// Makes `outputDir/runID` (and `outputDir`) if needed, finds the earlier
    /// attempts of this part (those that hold anything, oldest first) and
    /// creates the next attempt's file, never one that exists (`O_EXCL`).
    /// Earlier files that are empty (an attempt killed
    /// before it wrote its first line) hold nothing and are removed, so that
    /// `report` over the directory does not trip on them. Attempts of one part
    /// run one after another (Kubernetes starts a replacement pod only once
    /// the failed one is gone, with a podFailurePolicy): one started beside a
    /// running attempt that has not written its first line yet would take that
    /// attempt's empty file for a dead one.
    ///
    /// `resume` gets the earlier attempts before the new file is made, so a
    /// refusal there (another run's file) leaves nothing behind.
    public static func claim<Resume>(
        outputDir: String, runID: String, shard: Shard?, resume: ([String]) throws -> Resume
    ) throws -> (WarmAttempts, Resume) {
        if let problem = runIDProblem(runID) { throw FPError.usage(problem) }
        var info = stat()
        if stat(outputDir, &info) == 0, info.st_mode & S_IFMT != S_IFDIR {
            throw FPError.cannotWrite("--output-dir \(outputDir): not a directory")
        }
        let directory = PathName.join(outputDir, runID)
        try AtomicFile.makeDirectory(directory)
        let prefix = part(shard) + ".attempt-"
        guard let items = DirectoryWalker.list(directory) else {
            throw FPError.cannotWrite("\(directory): \(Errno.describe(errno))")
        }
        var numbered: [(Int, String, Int64)] = []
        for item in items where !item.isDirectory && item.name.hasPrefix(prefix) && item.name.hasSuffix(".json") {
            let digits = item.name.dropFirst(prefix.count).dropLast(".json".count)
            guard let number = Int(digits), number > 0 else { continue }
            numbered.append((number, PathName.join(directory, item.name), item.size))
        }
        numbered.sort { $0.0 < $1.0 }
        var earlier: [String] = []
        for (_, path, size) in numbered {
            if size == 0 { unlink(path) } else { earlier.append(path) }
        }
        let resumed = try resume(earlier)
        var number = (numbered.last?.0 ?? 0) + 1
        while true {
            let path = PathName.join(directory, "\(prefix)\(String(format: "%03d", number)).json")
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 {
                try AtomicFile.syncDirectory(directory)
                return (WarmAttempts(path: path, number: number, descriptor: fd), resumed)
            }
            guard errno == EEXIST else { throw FPError.cannotWrite("\(path): \(Errno.describe(errno))") }
            number += 1
        }
    }

    /// The `*.json` files of the directories among `paths` (in name order),
    /// the other paths as they are: `fpctl report DIR/RUN_ID`.
    public static func expand(_ paths: [String]) -> [String] {
        paths.flatMap { path -> [String] in
            var info = stat()
            guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR,
                let items = DirectoryWalker.list(path, stat: false)
            else { return [path] }
            let names = items.filter { !$0.isDirectory && $0.name.hasSuffix(".json") && !$0.name.hasPrefix(".") }
                .map(\.name).sorted()
            // A directory without outputs stays as it is, for an error that names it.
            return names.isEmpty ? [path] : names.map { PathName.join(path, $0) }
        }
    }
}
