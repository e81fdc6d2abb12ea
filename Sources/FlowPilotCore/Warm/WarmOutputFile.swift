import Crypto
import Foundation

/// A `fpctl warm --format json` output read back as warm writes it: the first
/// line `{"rows":[`, one row per line, and a last line `],"run":{…},…}` that
/// closes the document. The run comes from that last line (read from the end,
/// so the rows are never held); the rows stream, a chunk at a time.
public struct WarmOutputFile: Sendable {
    /// The document's `schema_version`.
    public static let schemaVersion = JSONDocument.schemaVersion

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

    // MARK: Writing, as `fpctl warm --format json` does

    /// Makes the document a piece at a time, for a writer that streams it: the
    /// first line, each outcome's row as it comes (a killed writer leaves a
    /// file `--resume` reads, up to its last whole row), and the last line with
    /// the run and the summary, which `WarmOutputFile(path:)` and `WarmReport`
    /// read back. Without rows, the last line is the whole document.
    public struct Writer: Sendable {
        public let rows: Bool
        private var stream = JSONDocument.Stream()

        public init(rows: Bool) { self.rows = rows }

        /// The first line: `{"rows":[`, or nothing without rows.
        public var start: Data { rows ? stream.start : Data() }

        /// One outcome's row, on a line of its own, after the separator it needs.
        public mutating func row(_ outcome: PrefetchOutcome) -> Data {
            stream.rowData(WarmOutputFile.row(outcome))
        }

        /// The last line: the run and the summary (without rows, the whole document).
        public func finish(run: WarmRunInfo, summary: OutcomeSummary) -> Data {
            let members: [ExactName: JSONValue] = ["run": run.json, "summary": summary.json]
            return rows ? stream.end(members) : JSONDocument.data(members)
        }
    }

    /// One outcome as a row: compact canonical JSON on one line.
    static func row(_ o: PrefetchOutcome) -> Data {
        CanonicalJSON.data(
            .object([
                "user_id": .string(o.identity.userID), "fingerprint": .string(o.identity.fingerprint),
                "placement": .string(o.placement), "state": .string(o.state.rawValue),
                "from_cache": o.state == .warmed ? .bool(o.fromCache) : .null,
                "delivery_source": o.deliverySource.map { .string($0.rawValue) } ?? .null,
                "media_warmed": .bool(o.mediaWarmed), "flow_id": o.flowID.map(JSONValue.string) ?? .null,
                "version": o.version.map(JSONValue.string) ?? .null,
                "ttl_seconds": o.ttlSeconds.map { .number(Double($0)) } ?? .null,
                "ms": .number(Double(o.milliseconds)),
                "error": o.errorCode.map { .object(["code": .string($0), "message": .string(o.errorMessage ?? "")]) }
                    ?? .null,
            ]))
    }

    /// A file cut short standing for `run`, the run that resumed it (`WarmReport`).
    init(path: String, run: WarmRunInfo) {
        self.path = path
        self.run = run
    }

    /// Reads the run from the file's last line. A missing file is `inputMissing`;
    /// anything that is not a complete warm output is `invalid`, naming the file.
    public init(path: String) throws {
        self.path = path
        let handle = try InputFile.handle(path, "warm output")
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        let tailSize = min(size, UInt64(Self.maxLastLine))
        try handle.seek(toOffset: size - tailSize)
        let tail = Array(try handle.read(upToCount: Int(tailSize)) ?? Data())
        guard let lastLine = Self.lastLine(of: tail), lastLine.starts(with: Self.lastLinePrefix),
            let json = try? JSONValue.parse(Data(Self.firstLine + lastLine))
        else {
            throw Self.invalid(path, "not a complete warm JSON document (its last line has no run)")
        }
        guard json["schema_version"]?.numberValue == Double(Self.schemaVersion) else {
            throw Self.invalid(path, "schema_version is not \(Self.schemaVersion)")
        }
        guard let run = json["run"].flatMap(WarmRunInfo.init(json:)) else {
            throw Self.invalid(path, "its run object lacks run_id, shard, placements, started_at or ended_at")
        }
        self.run = run
    }

    /// Every row, in file order.
    public func forEachRow(_ body: (Row) throws -> Void) throws {
        let handle = try InputFile.handle(path, "warm output")
        defer { try? handle.close() }
        var lines = LineBuffer()
        var lineNumber = 0
        var atEnd = false
        while true {
            guard var line = lines.nextLine() else {
                if atEnd {
                    // The last line without its final newline is still the last line.
                    if lines.remainder()?.starts(with: Self.lastLinePrefix) == true { return }
                    throw Self.invalid(path, "ends before its last line")
                }
                if let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                    lines.append(chunk)
                } else {
                    atEnd = true
                }
                continue
            }
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

    /// What a warm output held when it ended, complete or cut short by a kill:
    /// its whole rows, the run when its last line is there, and a digest that
    /// names exactly those rows (`WarmRunInfo.ResumedFrom`).
    public struct WholeRows: Sendable {
        public let path: String
        public let rows: Int
        /// SHA-256 of line 1 and every whole row, each with a newline and
        /// without the comma between rows: the same for a file whether it was
        /// killed just after a row, mid-row, or ended normally.
        public let sha256: String
        /// The run, from the last line; nil when the file was cut short.
        public let run: WarmRunInfo?
    }

    /// Streams the whole rows of a warm output, complete or cut short (its last
    /// line missing, its last row maybe half written: that one is left out).
    /// Anything that is not a warm output is `invalid` naming the file; a
    /// missing file is `inputMissing`.
    public static func wholeRows(path: String, _ body: (Row) throws -> Void) throws -> WholeRows {
        let handle = try InputFile.handle(path, "warm output")
        defer { try? handle.close() }
        var hasher = SHA256()
        var lines = LineBuffer()
        var lineNumber = 0
        var count = 0
        func take(_ line: ArraySlice<UInt8>) throws {
            let row = line.last == UInt8(ascii: ",") ? line.dropLast() : line
            try body(try Self.row(Data(row), at: "\(path):\(lineNumber)"))
            hasher.update(data: Array(row) + [0x0A])
            count += 1
        }
        while true {
            guard let line = lines.nextLine() else {
                if let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                    lines.append(chunk)
                    continue
                }
                let rest = lines.remainder()
                if lineNumber == 0 {
                    // Killed before its first row: nothing, or line 1 alone.
                    guard rest == nil || rest.map(Array.init) == Self.firstLine else {
                        throw invalid(path, "not a warm JSON document (line 1 is not {\"rows\":[)")
                    }
                    hasher.update(data: Self.firstLine + [0x0A])
                } else if let rest, (try? Self.row(Data(rest), at: path)) != nil {
                    // Cut short just after a row (no newline yet): it counts; half a row does not.
                    lineNumber += 1
                    try take(rest)
                }
                break
            }
            lineNumber += 1
            if lineNumber == 1 {
                guard Array(line) == Self.firstLine else {
                    throw invalid(path, "not a warm JSON document (line 1 is not {\"rows\":[)")
                }
                hasher.update(data: Self.firstLine + [0x0A])
                continue
            }
            if line.starts(with: Self.lastLinePrefix) {
                let complete = try WarmOutputFile(path: path)
                return WholeRows(path: path, rows: count, sha256: Digest.hex(hasher.finalize()), run: complete.run)
            }
            try take(line)
        }
        return WholeRows(path: path, rows: count, sha256: Digest.hex(hasher.finalize()), run: nil)
    }

    private func row(_ line: Data, _ lineNumber: Int) throws -> Row {
        try Self.row(line, at: "\(path):\(lineNumber)")
    }

    private static func row(_ line: Data, at: String) throws -> Row {
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
