import Crypto
import Foundation

/// Extracts a bundle that has passed validation, writing only inside the target
/// directory: everything lands in a hidden staging directory first and is moved
/// into place at the end, so a failure leaves the target as it was. Every file
/// and directory is synced before the move and the target after it, so what
/// `extract` reported survives a power cut.
public enum BundleExtractor {
    public struct Result: Sendable {
        public let directory: String
        public let files: Int
        public let bytes: Int64
        public let digest: String
    }

    /// - Parameter force: extract into a directory that is not empty; same-named
    ///   top-level items in it are replaced.
    public static func extract(_ bundle: String, into directory: String, force: Bool) throws -> Result {
        let report = try BundleValidator.validate(bundle)
        guard report.isValid, let digest = report.digest else { throw FPError.invalid(report.findings) }
        try prepare(directory, force: force)
        let staging = try makeStaging(in: directory)
        defer { try? FileManager.default.removeItem(at: staging) }
        let expected = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.path, $0.sha256 ?? "") })
        let (files, bytes) = try writeEntries(of: bundle, into: staging, expected: expected, directory: directory)
        try syncDirectories(under: staging)
        try moveIntoPlace(from: staging, to: directory)
        try sync(directory: directory)
        try sync(directory: URL(fileURLWithPath: directory).deletingLastPathComponent().path)
        return Result(directory: directory, files: files, bytes: bytes, digest: digest)
    }

    /// The target exists as an empty directory (or any directory, with `force`).
    private static func prepare(_ directory: String, force: Bool) throws {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        guard fm.fileExists(atPath: directory, isDirectory: &isDir) else {
            do { try fm.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
                throw FPError.cannotWrite("\(directory): cannot create: \(error.localizedDescription)")
            }
            return
        }
        guard isDir.boolValue else { throw FPError.cannotWrite("\(directory): exists and is not a directory") }
        let existing = (try? fm.contentsOfDirectory(atPath: directory)) ?? []
        if !existing.isEmpty && !force {
            throw FPError.directoryNotEmpty(directory)
        }
    }

    private static func makeStaging(in directory: String) throws -> URL {
        let staging = URL(fileURLWithPath: directory).appendingPathComponent(
            ".fpctl-extract-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        do { try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: false) } catch {
            throw FPError.cannotWrite("\(directory): cannot write: \(error.localizedDescription)")
        }
        return staging
    }

    /// Every entry into `staging`, each checked against the SHA-256 validation saw:
    /// the file could have been swapped between validating and extracting.
    private static func writeEntries(
        of bundle: String, into staging: URL, expected: [String: String], directory: String
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
                let (sha256, size) = try writeEntry(reader, to: staging.appendingPathComponent(entry.path))
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
    private static func writeEntry(_ reader: ZipReader, to target: URL) throws -> (String, Int64) {
        try FileManager.default.createDirectory(
            at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        let fd = open(target.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FPError.cannotWrite("\(target.path): \(Errno.describe(errno))") }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var hasher = SHA256()
        var size: Int64 = 0
        try reader.readData { chunk in
            hasher.update(bufferPointer: chunk)
            try handle.write(contentsOf: Data(chunk))
            size += Int64(chunk.count)
            return true
        }
        guard Platform.syncData(fd) else { throw FPError.cannotWrite("\(target.path): \(Errno.describe(errno))") }
        try handle.close()
        return (Digest.hex(hasher.finalize()), size)
    }

    /// Syncs `staging` and every directory under it, so the names in them are durable.
    private static func syncDirectories(under staging: URL) throws {
        var directories = [staging.path]
        if let walker = FileManager.default.enumerator(atPath: staging.path) {
            while let rel = walker.nextObject() as? String {
                if (walker.fileAttributes?[.type] as? FileAttributeType) == .typeDirectory {
                    directories.append("\(staging.path)/\(rel)")
                }
            }
        }
        for path in directories { try sync(directory: path) }
    }

    private static func sync(directory: String) throws {
        guard Platform.syncDirectory(directory) else {
            throw FPError.cannotWrite("\(directory): \(Errno.describe(errno))")
        }
    }

    /// Top-level items from `staging` into `directory`, replacing same-named ones.
    private static func moveIntoPlace(from staging: URL, to directory: String) throws {
        let fm = FileManager.default
        for item in try fm.contentsOfDirectory(atPath: staging.path).sorted() {
            let destination = URL(fileURLWithPath: directory).appendingPathComponent(item)
            if fm.fileExists(atPath: destination.path) { try? fm.removeItem(at: destination) }
            do { try fm.moveItem(at: staging.appendingPathComponent(item), to: destination) } catch {
                throw FPError.cannotWrite("\(destination.path): \(error.localizedDescription)")
            }
        }
    }
}
