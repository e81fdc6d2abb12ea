import CArchive
import Foundation

/// Writes a zip with libarchive, one regular file at a time, with every header
/// field that could vary between machines pinned: mode 0644, uid/gid 0, no names,
/// one timestamp, UTC. The bytes reach the file through `WriteBehind`, so the
/// write(2) calls run beside libarchive's CRC-32 and deflate.
final class ZipWriter {
    private let archive: OpaquePointer
    private var closed = false
    private let savedTZ: String?
    private let output: WriteBehind
    /// Why the output failed, when it did: libarchive only learns that it did.
    private var outputError: ArchiveError?

    init(path: String) throws {
        guard let a = archive_write_new() else { throw ArchiveError(message: "libarchive: out of memory") }
        archive = a
        do { output = try WriteBehind(path: path) } catch {
            archive_write_free(a)
            throw error
        }
        // libarchive converts mtime to a DOS date with localtime(); pin the zone so the
        // same input gives the same bytes under any TZ. Restored in close().
        savedTZ = getenv("TZ").map { String(cString: $0) }
        setenv("TZ", "UTC0", 1)
        tzset()
        do {
            try check(archive_write_set_format_zip(a))
            // No blocking: every byte goes straight to WriteBehind, which
            // gathers them into 1 MiB writes (and pads nothing).
            try check(archive_write_set_bytes_per_block(a, 0))
            try check(
                archive_write_open2(
                    a, Unmanaged.passUnretained(self).toOpaque(), nil,
                    { _, client, buffer, length in
                        guard let client else { return -1 }
                        let writer = Unmanaged<ZipWriter>.fromOpaque(client).takeUnretainedValue()
                        return writer.deliver(UnsafeRawBufferPointer(start: buffer, count: length))
                    }, nil, nil))
        } catch {
            archive_write_free(a)
            restoreTZ()
            closed = true
            throw error
        }
    }

    deinit {
        if !closed {
            archive_write_free(archive)
            restoreTZ()
        }
    }

    /// Adds one regular file; `body` is called with a sink to stream its bytes.
    func addFile(
        path: String, size: Int64, mtime: Int64, store: Bool,
        body: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
    ) throws {
        try check(
            store
                ? archive_write_zip_set_compression_store(archive)
                : archive_write_zip_set_compression_deflate(archive))
        guard let entry = archive_entry_new() else { throw ArchiveError(message: "libarchive: out of memory") }
        defer { archive_entry_free(entry) }
        archive_entry_set_pathname(entry, path)
        archive_entry_set_filetype(entry, 0o100000)  // AE_IFREG (a macro Swift cannot import)
        archive_entry_set_perm(entry, 0o644)
        archive_entry_set_uid(entry, 0)
        archive_entry_set_gid(entry, 0)
        archive_entry_set_size(entry, size)
        archive_entry_set_mtime(entry, time_t(mtime), 0)
        try check(archive_write_header(archive, entry))
        var written: Int64 = 0
        try body { chunk in
            guard chunk.count > 0 else { return }
            let n = archive_write_data(archive, chunk.baseAddress, chunk.count)
            if n < 0 { try check(Int32(n)) }
            written += Int64(chunk.count)
        }
        guard written == size else {
            throw ArchiveError(
                message: "\(path) changed while it was being archived (\(written) bytes, expected \(size))")
        }
        try check(archive_write_finish_entry(archive))
    }

    func close() throws {
        guard !closed else { return }
        closed = true
        defer {
            archive_write_free(archive)
            restoreTZ()
        }
        try check(archive_write_close(archive))
        // Not in a close callback: libarchive ignores what that returns, and a
        // disk that filled during the last writes must fail the build.
        try output.finish()
    }

    /// libarchive's write callback: bytes in archive order.
    private func deliver(_ bytes: UnsafeRawBufferPointer) -> Int {
        do {
            try output.append(bytes)
            return bytes.count
        } catch {
            outputError = error as? ArchiveError ?? ArchiveError(message: "\(error)")
            return -1
        }
    }

    private func restoreTZ() {
        if let savedTZ { setenv("TZ", savedTZ, 1) } else { unsetenv("TZ") }
        tzset()
    }

    private func check(_ status: Int32) throws {
        if status < ARCHIVE_OK {
            if let outputError { throw outputError }
            let message = archive_error_string(archive).map { String(cString: $0) } ?? "libarchive error \(status)"
            throw ArchiveError(message: message)
        }
    }
}
