import Foundation
import NIOPosix
import Synchronization

/// Identities from JSON Lines, `{"user_id": "…", "attributes": {…}}` a line,
/// blank lines skipped. Read in chunks of up to 64 KiB (what a pipe holds
/// now: a line is handed on when it comes) on NIO's blocking-I/O thread pool
/// as the consumer asks for them: never the whole input in memory, no blocking
/// read on a Swift concurrency thread, and no reader running ahead of the work.
public struct IdentityLines: AsyncSequence, Sendable {
    /// The longest identity line read (user id and attributes): a longer one
    /// is an error found as it is read, not after buffering all of it.
    public static let maxLine = 1 << 20

    public typealias Element = Identity

    let handle: FileHandle
    /// Names the input in error messages.
    let name: String
    /// The input's size when it is a regular file: with `consumed`, how far a
    /// run has come (a progress line's percentage); nil for a pipe.
    public let size: Int64?
    private let consumedBytes = Counter()

    /// `-` reads standard input; a missing file, a directory or one that cannot
    /// be read is `FPError.inputMissing`. A pipe is read like a file.
    public init(path: String) throws {
        if path == "-" {
            (handle, name) = (FileHandle.standardInput, "-")
        } else {
            (handle, name) = (try InputFile.handle(path, "identities file", kind: .stream), path)
        }
        var info = stat()
        let regular = fstat(handle.fileDescriptor, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
        size = regular && info.st_size > 0 ? Int64(info.st_size) : nil
    }

    /// The bytes of the lines handed out so far (blank and skipped ones too).
    public var consumed: Int64 { consumedBytes.value.load(ordering: .relaxed) }

    /// The share of the input handed out, 0 to 1, when its size is known.
    public var fraction: Double? { size.map { Swift.min(1, Double(consumed) / Double($0)) } }

    final class Counter: Sendable {
        let value = Atomic<Int64>(0)
    }

    public func makeAsyncIterator() -> Iterator { Iterator(handle: handle, name: name, consumed: consumedBytes) }

    public struct Iterator: AsyncIteratorProtocol {
        let handle: FileHandle
        let name: String
        let consumed: Counter
        private var lines = LineBuffer()
        private var lineNumber = 0
        private var atEnd = false

        init(handle: FileHandle, name: String, consumed: Counter) {
            self.handle = handle
            self.name = name
            self.consumed = consumed
        }

        public mutating func next() async throws -> Identity? {
            while true {
                if let next = try nextIfBuffered() { return next }
                // No complete line is left: what is buffered is the next one, too long already?
                try lines.check(limit: IdentityLines.maxLine, name: name, lineNumber: lineNumber + 1)
                let handle = self.handle
                let name = self.name
                let chunk = try await NIOThreadPool.singleton.runIfActive {
                    try InputFile.chunk(handle, name: name, "identities file")
                }
                if chunk.isEmpty { atEnd = true } else { lines.append(chunk) }
            }
        }

        /// The next identity when its line is read already (`.some(nil)` at
        /// the end of the input); nil when the next needs a read, which only
        /// `next()` makes. A warm takes the lines of a chunk this way, with no
        /// task for each (`WarmRun`).
        public mutating func nextIfBuffered() throws -> Identity?? {
            while let line = lines.nextLine() ?? (atEnd ? lines.remainder() : nil) {
                consumed.value.add(Int64(line.count + 1), ordering: .relaxed)
                if let identity = try parse(line) { return .some(identity) }
            }
            return atEnd ? .some(nil) : nil
        }

        /// One line's identity; nil for a blank line.
        private mutating func parse(_ line: ArraySlice<UInt8>) throws -> Identity? {
            lineNumber += 1
            return try IdentityLines.identity(line, name: name, lineNumber: lineNumber)
        }
    }

    /// One line's identity; nil for a blank line. Errors name `NAME:LINE`.
    static func identity(_ line: ArraySlice<UInt8>, name: String, lineNumber: Int) throws -> Identity? {
        // An object's members as a list (no table of them made): a line is an object of one or two.
        if let members = try? line.withUnsafeBytes({ try JSONValue.parseMembers(bytes: $0) }),
            let user = members.first(where: { $0.key.sameBytes(as: "user_id") })?.value.stringValue
        {
            return Identity(
                userID: user, attributes: members.first { $0.key.sameBytes(as: "attributes") }?.value.objectValue ?? [:]
            )
        }
        // Anything else (blank, not JSON, not an object, no user id) is read as it always was, errors and all.
        guard let json = try JSONLines.value(of: line, name: name, lineNumber: lineNumber) else { return nil }
        guard let user = json["user_id"]?.stringValue else {
            throw FPError.invalid([.error("identity", "\(name):\(lineNumber)", "each line needs a string user_id")])
        }
        return Identity(userID: user, attributes: json["attributes"]?.objectValue ?? [:])
    }
}
