import Foundation

/// Streams JSON Lines: one value per line, blank lines skipped, never the whole
/// input in memory (a million identities must not need a million in memory).
public enum JSONLines {
    /// Each line's value with its number; `name` (the file, or `-`) names the
    /// input in errors: `jsonl: NAME:LINE: …`.
    /// A line longer than `maxLine` bytes is an error, found as it is read.
    public static func forEach(
        _ handle: FileHandle, name: String, maxLine: Int = 16 << 20, _ body: (Int, JSONValue) throws -> Void
    ) throws {
        var lines = LineBuffer()
        var lineNumber = 0
        func emit(_ line: ArraySlice<UInt8>) throws {
            lineNumber += 1
            if let value = try value(of: line, name: name, lineNumber: lineNumber) { try body(lineNumber, value) }
        }
        while case let chunk = try InputFile.chunk(handle, name: name, "input"), !chunk.isEmpty {
            lines.append(chunk)
            while let line = lines.nextLine() { try emit(line) }
            try lines.check(limit: maxLine, name: name, lineNumber: lineNumber + 1)
        }
        if let last = lines.remainder() { try emit(last) }
    }
}
