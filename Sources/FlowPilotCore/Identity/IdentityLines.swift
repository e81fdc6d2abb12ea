import Foundation
import NIOPosix

/// Identities from JSON Lines, `{"user_id": "…", "attributes": {…}}` a line,
/// blank lines skipped. Read in 64 KiB chunks on NIO's blocking-I/O thread pool
/// as the consumer asks for them: never the whole input in memory, no blocking
/// read on a Swift concurrency thread, and no reader running ahead of the work.
public struct IdentityLines: AsyncSequence, Sendable {
    public typealias Element = Identity

    let handle: FileHandle
    /// Names the input in error messages.
    let name: String

    /// `-` reads standard input; a missing file is `FPError.inputMissing`.
    public init(path: String) throws {
        if path == "-" {
            (handle, name) = (FileHandle.standardInput, "-")
        } else {
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw FPError.inputMissing("\(path): no such identities file")
            }
            (self.handle, name) = (handle, path)
        }
    }

    public func makeAsyncIterator() -> Iterator { Iterator(handle: handle, name: name) }

    public struct Iterator: AsyncIteratorProtocol {
        let handle: FileHandle
        let name: String
        private var buffer: [UInt8] = []
        private var position = 0
        private var lineNumber = 0
        private var atEnd = false

        init(handle: FileHandle, name: String) {
            self.handle = handle
            self.name = name
        }

        public mutating func next() async throws -> Identity? {
            while true {
                if let newline = buffer[position...].firstIndex(of: 0x0A) {
                    let line = buffer[position..<newline]
                    position = newline + 1
                    if let identity = try parse(line) { return identity }
                    continue
                }
                if atEnd {
                    guard position < buffer.count else { return nil }
                    let line = buffer[position...]
                    position = buffer.count
                    if let identity = try parse(line) { return identity }
                    continue
                }
                try await refill()
            }
        }

        /// Drops the lines consumed and appends the next chunk.
        private mutating func refill() async throws {
            buffer.removeSubrange(0..<position)
            position = 0
            let handle = self.handle
            let chunk = try await NIOThreadPool.singleton.runIfActive { try handle.read(upToCount: 1 << 16) }
            if let chunk, !chunk.isEmpty { buffer.append(contentsOf: chunk) } else { atEnd = true }
        }

        /// One line's identity; nil for a blank line.
        private mutating func parse(_ line: ArraySlice<UInt8>) throws -> Identity? {
            lineNumber += 1
            guard line.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { return nil }
            let json: JSONValue
            do { json = try JSONValue.parse(Data(line)) } catch {
                throw FPError.invalid([.error("jsonl", "\(name):\(lineNumber)", "\(error)")])
            }
            guard let user = json["user_id"]?.stringValue else {
                throw FPError.invalid([.error("identity", "\(name):\(lineNumber)", "each line needs a string user_id")])
            }
            return Identity(userID: user, attributes: json["attributes"]?.objectValue ?? [:])
        }
    }
}
