import Foundation

/// Streams JSON Lines: one value per line, blank lines skipped, never the whole
/// input in memory (a million identities must not need a million in memory).
public enum JSONLines {
    /// Each line's value with its number; `name` (the file, or `-`) names the
    /// input in errors: `jsonl: NAME:LINE: …`.
    public static func forEach(_ handle: FileHandle, name: String, _ body: (Int, JSONValue) throws -> Void) throws {
        var buffer = Data()
        var lineNumber = 0
        func emit(_ line: Data) throws {
            lineNumber += 1
            guard line.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { return }
            let value: JSONValue
            do { value = try JSONValue.parse(line) } catch {
                throw FPError.invalid([.error("jsonl", "\(name):\(lineNumber)", "\(error)")])
            }
            try body(lineNumber, value)
        }
        while let chunk = try handle.read(upToCount: 1 << 16), !chunk.isEmpty {
            buffer.append(chunk)
            while let newline = buffer.firstIndex(of: 0x0A) {
                try emit(buffer[buffer.startIndex..<newline])
                buffer.removeSubrange(buffer.startIndex...newline)
            }
        }
        if !buffer.isEmpty { try emit(buffer) }
    }
}
