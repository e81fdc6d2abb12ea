import Foundation

/// A `fpctl warm --format json` output read back as warm writes it: the first
/// line `{"rows":[`, one row per line, and a last line `],"run":{…},…}` that
/// closes the document. The run comes from that last line (read from the end,
/// so the rows are never held); the rows stream, a chunk at a time.
public struct WarmOutputFile: Sendable {
    public struct Row: Sendable {
        public let userID: String
        public let fingerprint: String
        public let placement: String
        public let state: PrefetchOutcome.State
        public let deliverySource: Tier?
        public let errorCode: String?
        public let mediaWarmed: Bool
        public let milliseconds: Int
    }

    public let path: String
    public let run: WarmRunInfo

    static let firstLine = Array(#"{"rows":["#.utf8)
    static let lastLinePrefix = Array(#"],"run":"#.utf8)
    /// The last line holds the run and the summary; far more placements than any run has fit in this.
    static let maxLastLine = 16 << 20

    /// Reads the run from the file's last line. A missing file is `inputMissing`;
    /// anything that is not a complete warm output is `invalid`, naming the file.
    public init(path: String) throws {
        self.path = path
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw FPError.inputMissing("\(path): no such warm output")
        }
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        let tailSize = min(size, UInt64(Self.maxLastLine))
        try handle.seek(toOffset: size - tailSize)
        let tail = Array(try handle.read(upToCount: Int(tailSize)) ?? Data())
        guard let lastLine = Self.lastLine(of: tail), lastLine.starts(with: Self.lastLinePrefix),
            let json = try? JSONValue.parse(Data(Self.firstLine + lastLine))
        else {
            throw Self.invalid(path, "not a complete `fpctl warm --format json` output (its last line has no run)")
        }
        guard json["schema_version"]?.numberValue == Double(JSONOutput.schemaVersion) else {
            throw Self.invalid(path, "schema_version is not \(JSONOutput.schemaVersion)")
        }
        guard let run = json["run"].flatMap(WarmRunInfo.init(json:)) else {
            throw Self.invalid(path, "its run object lacks run_id, shard, placements, started_at or ended_at")
        }
        self.run = run
    }

    /// Every row, in file order.
    public func forEachRow(_ body: (Row) throws -> Void) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw FPError.inputMissing("\(path): no such warm output")
        }
        defer { try? handle.close() }
        var buffer: [UInt8] = []
        var position = 0
        var lineNumber = 0
        var atEnd = false
        while true {
            guard let newline = buffer[position...].firstIndex(of: 0x0A) else {
                if atEnd {
                    // The last line without its final newline is still the last line.
                    if buffer[position...].starts(with: Self.lastLinePrefix) { return }
                    throw Self.invalid(path, "ends before its last line")
                }
                buffer.removeSubrange(0..<position)
                position = 0
                if let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                    buffer.append(contentsOf: chunk)
                } else {
                    atEnd = true
                }
                continue
            }
            var line = buffer[position..<newline]
            position = newline + 1
            lineNumber += 1
            if lineNumber == 1 {
                guard Array(line) == Self.firstLine else { throw Self.invalid(path, "line 1 is not {\"rows\":[") }
                continue
            }
            if line.starts(with: Self.lastLinePrefix) { return }
            if line.last == UInt8(ascii: ",") { line = line.dropLast() }
            try body(try row(Data(line), lineNumber))
        }
    }

    private func row(_ line: Data, _ lineNumber: Int) throws -> Row {
        let at = "\(path):\(lineNumber)"
        guard let json = try? JSONValue.parse(line), let placement = json["placement"]?.stringValue,
            let fingerprint = json["fingerprint"]?.stringValue, let userID = json["user_id"]?.stringValue,
            let state = json["state"]?.stringValue.flatMap(PrefetchOutcome.State.init(rawValue:)),
            let ms = json["ms"]?.numberValue
        else {
            throw FPError.invalid([.error("report-input", at, "not a warm row")])
        }
        return Row(
            userID: userID, fingerprint: fingerprint, placement: placement, state: state,
            deliverySource: json["delivery_source"]?.stringValue.flatMap(Tier.init(rawValue:)),
            errorCode: json["error"]?["code"]?.stringValue, mediaWarmed: json["media_warmed"]?.boolValue ?? false,
            milliseconds: Int(ms))
    }

    /// The bytes after the last newline that is followed by something (a final newline is allowed).
    private static func lastLine(of bytes: [UInt8]) -> ArraySlice<UInt8>? {
        var end = bytes.count
        while end > 0 && (bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D) { end -= 1 }
        guard end > 0, let newline = bytes[..<end].lastIndex(of: 0x0A) else { return nil }
        return bytes[(newline + 1)..<end]
    }

    private static func invalid(_ path: String, _ message: String) -> FPError {
        .invalid([.error("report-input", path, message)])
    }
}
