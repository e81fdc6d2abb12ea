import Crypto
import Foundation

/// Extracts a bundle that has passed validation, writing only inside the target
/// directory: everything lands in a hidden staging directory first and is moved
/// into place at the end, so a failure leaves the target as it was.
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
        let report = try BundleReader.validate(bundle)
        guard report.isValid, let manifest = report.manifest, let digest = report.digest else {
            throw FPError.invalid(report.findings)
        }
        let fm = FileManager.default
        var isDir: ObjCBool = false
        if fm.fileExists(atPath: directory, isDirectory: &isDir) {
            guard isDir.boolValue else { throw FPError.cannotWrite("\(directory): exists and is not a directory") }
            let existing = (try? fm.contentsOfDirectory(atPath: directory)) ?? []
            if !existing.isEmpty && !force {
                throw FPError.cannotWrite("\(directory): not empty (use --force to extract into it anyway)")
            }
        } else {
            do { try fm.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
                throw FPError.cannotWrite("\(directory): cannot create: \(error.localizedDescription)")
            }
        }
        let staging = URL(fileURLWithPath: directory).appendingPathComponent(
            ".fpctl-extract-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        do { try fm.createDirectory(at: staging, withIntermediateDirectories: false) } catch {
            throw FPError.cannotWrite("\(directory): cannot write: \(error.localizedDescription)")
        }
        defer { try? fm.removeItem(at: staging) }

        let expected = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.path, $0.sha256 ?? "") })
        var files = 0
        var bytes: Int64 = 0
        do {
            let reader = try ZipReader(path: bundle)
            while let entry = try reader.next() {
                // Paths were checked against the canonical pattern: no '..', no absolute, no backslash.
                guard BundlePath.isCanonical(entry.path), let sha = expected[entry.path] else {
                    throw FPError.invalid([.error("zip-structure", entry.path, "entry changed since validation")])
                }
                let target = staging.appendingPathComponent(entry.path)
                try fm.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                let fd = open(target.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
                guard fd >= 0 else { throw FPError.cannotWrite("\(target.path): \(String(cString: strerror(errno)))") }
                let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
                var hasher = SHA256()
                try reader.readData { chunk in
                    hasher.update(bufferPointer: chunk)
                    try handle.write(contentsOf: Data(chunk))
                    bytes += Int64(chunk.count)
                    return true
                }
                try handle.close()
                // The file could have been swapped between validating and extracting.
                guard Digest.hex(hasher.finalize()) == sha else {
                    throw FPError.invalid([
                        .error("manifest-hash-mismatch", entry.path, "content changed since validation")
                    ])
                }
                files += 1
            }
        } catch let error as FPError {
            throw error
        } catch {
            throw FPError.cannotWrite("\(directory): \(error)")
        }
        for item in try fm.contentsOfDirectory(atPath: staging.path).sorted() {
            let destination = URL(fileURLWithPath: directory).appendingPathComponent(item)
            if fm.fileExists(atPath: destination.path) { try? fm.removeItem(at: destination) }
            do { try fm.moveItem(at: staging.appendingPathComponent(item), to: destination) } catch {
                throw FPError.cannotWrite("\(destination.path): \(error.localizedDescription)")
            }
        }
        _ = manifest
        return Result(directory: directory, files: files, bytes: bytes, digest: digest)
    }
}
