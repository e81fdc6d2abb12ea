import CArchive
import Foundation

/// Streams the entries of a zip through libarchive's seekable zip reader (the one
/// that trusts the central directory), one block at a time. Nothing is extracted.
final class ZipReader {
    struct Entry {
        let path: String
        let isEncrypted: Bool
    }

    private let archive: OpaquePointer

    /// With `checksCRC` false, libarchive does not compute CRC-32s: the caller
    /// checks them (`bundle validate` does, with `CRC32`, several times faster).
    init(path: String, checksCRC: Bool = true) throws {
        guard let a = archive_read_new() else { throw ArchiveError(message: "libarchive: out of memory") }
        archive = a
        archive_read_support_format_zip_seekable(a)
        archive_read_support_filter_none(a)
        if !checksCRC, archive_read_set_format_option(a, "zip", "ignorecrc32", "1") != ARCHIVE_OK {
            let message = errorMessage()
            archive_read_free(a)
            throw ArchiveError(message: message)
        }
        if archive_read_open_filename(a, path, 64 * 1024) != ARCHIVE_OK {
            let message = errorMessage()
            archive_read_free(a)
            throw ArchiveError(message: message)
        }
    }

    deinit { archive_read_free(archive) }

    /// The next entry's header, or nil at the end.
    func next() throws -> Entry? {
        var entry: OpaquePointer?
        let status = archive_read_next_header(archive, &entry)
        if status == ARCHIVE_EOF { return nil }
        if status < ARCHIVE_WARN { throw ArchiveError(message: errorMessage()) }
        guard let entry else { throw ArchiveError(message: "libarchive returned no entry") }
        let path = archive_entry_pathname(entry).map { String(cString: $0) } ?? ""
        return Entry(path: path, isEncrypted: archive_entry_is_encrypted(entry) != 0)
    }

    /// Calls `body` with each decompressed block of the current entry until the
    /// entry ends or `body` returns false (to stop early, e.g. a bomb).
    func readData(_ body: (UnsafeRawBufferPointer) throws -> Bool) throws {
        while true {
            var buffer: UnsafeRawPointer?
            var size = 0
            var offset: la_int64_t = 0
            let status = archive_read_data_block(archive, &buffer, &size, &offset)
            if status == ARCHIVE_EOF { return }
            // A warning here is damage, not a detail: libarchive reports a CRC-32
            // that does not match the data ("ZIP bad CRC") as ARCHIVE_WARN.
            if status != ARCHIVE_OK { throw ArchiveError(message: errorMessage()) }
            if size > 0, let buffer {
                if try !body(UnsafeRawBufferPointer(start: buffer, count: size)) { return }
            }
        }
    }

    private func errorMessage() -> String {
        archive_error_string(archive).map { String(cString: $0) } ?? "unreadable archive"
    }
}
