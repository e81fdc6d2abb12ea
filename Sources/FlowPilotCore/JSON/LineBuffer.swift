import Foundation

/// Lines out of chunks read one at a time, keeping only the unfinished line
/// between reads: how JSON Lines inputs and warm outputs stream, whatever their size.
struct LineBuffer {
    private var bytes: [UInt8] = []
    private var position = 0
    /// Where the search for the next newline goes on: the bytes before it
    /// hold none, so a long line is scanned once, not once per chunk.
    private var scanned = 0

    /// The next complete line, without its newline; nil until more bytes come.
    mutating func nextLine() -> ArraySlice<UInt8>? {
        guard let newline = bytes[max(position, scanned)...].firstIndex(of: 0x0A) else {
            scanned = bytes.count
            return nil
        }
        defer { position = newline + 1 }
        return bytes[position..<newline]
    }

    /// Bytes of the line not yet complete.
    var pending: Int { bytes.count - position }

    /// Throws when the line being read is already longer than `limit` bytes,
    /// before more of it is read: `jsonl: NAME:LINE: …`.
    func check(limit: Int, name: String, lineNumber: Int) throws {
        guard pending > limit else { return }
        throw FPError.invalid([
            .error("jsonl", "\(name):\(lineNumber)", "line longer than \(limit >> 20) MiB; one JSON value a line")
        ])
    }

    /// Adds a chunk, dropping the lines already taken.
    mutating func append(_ chunk: Data) {
        bytes.removeSubrange(0..<position)
        scanned = max(0, scanned - position)
        position = 0
        bytes.append(contentsOf: chunk)
    }

    /// Once the input has ended: what follows the last newline, if anything (taken once).
    mutating func remainder() -> ArraySlice<UInt8>? {
        guard position < bytes.count else { return nil }
        defer { position = bytes.count }
        return bytes[position...]
    }
}

extension JSONLines {
    /// One line's value; nil for a blank line. Errors are `jsonl: NAME:LINE: …`.
    static func value(of line: ArraySlice<UInt8>, name: String, lineNumber: Int) throws -> JSONValue? {
        guard line.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { return nil }
        do { return try JSONValue.parse(Data(line)) } catch {
            throw FPError.invalid([.error("jsonl", "\(name):\(lineNumber)", "\(error)")])
        }
    }
}
