import Foundation

/// A temporary file with no name (`O_TMPFILE`) for bytes a command writes
/// and reads back (a listing's sorted runs, an aligned table's rows):
/// nothing is left behind, whatever ends the process. Where there is no
/// `O_TMPFILE`, a `mkstemp` file unlinked at once (a kill between the two
/// leaves `.fpctl-list-*`).
public enum ScratchFile {
    /// A new one in `directory` (Foundation's temporary directory, `TMPDIR`, else /tmp, when nil), open for reading and writing.
    public static func open(in directory: String? = nil) throws -> Int32 {
        let dir = directory ?? FileManager.default.temporaryDirectory.path
        if let fd = Platform.openUnnamed(in: dir, readable: true) { return fd }
        var template = Array("\(dir)/.fpctl-list-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else {
            throw FPError.cannotWrite("\(dir): a listing's temporary file: \(Errno.describe(errno))")
        }
        template.withUnsafeBufferPointer { buffer in _ = buffer.baseAddress.map { unlink($0) } }
        return fd
    }
}
