import FlowPilotCore
import Foundation

/// `cache info`: the counts and budgets as text, one row per placement as
/// CSV, the core's summary as JSON.
public struct CacheInfoReport: Rendering {
    public let document: CacheSummary

    public init(_ summary: CacheSummary) { document = summary }

    public func text() -> String {
        let info = document
        let range =
            "\(info.oldestResolvedAt.map(RFC3339.string) ?? "-") .. \(info.newestResolvedAt.map(RFC3339.string) ?? "-")"
        var out = """
            cache_dir   \(info.cacheDir)
            flows       \(info.flows) (\(info.fresh) fresh, \(info.stale) stale), \(info.aliases) aliases, \(info.flowBytes) bytes
            images      \(info.images) (\(info.expiredImages) expired), \(info.imageBytes) of \(info.imageBudgetBytes) bytes
            fonts       \(info.fonts), \(info.fontBytes) bytes
            resolved    \(range)

            """
        if info.locksWork == false {
            let fileSystem = info.fileSystem.map { " (\($0))" } ?? ""
            out += "locks       do nothing on this file system\(fileSystem): prune, clear and verify --repair refuse\n"
        }
        if !info.placements.isEmpty { out += "\n" + placements(alias: { $0 ? "yes" : "no" }).text() }
        return out
    }

    public var table: Table? { placements(alias: { "\($0)" }) }

    /// The per-placement table; CSV says the alias as `true`/`false`, text as `yes`/`no`.
    private func placements(alias: (Bool) -> String) -> Table {
        Table(
            columns: ["placement", "entries", "fresh", "stale", "bytes", "alias"],
            rows: document.placements.map {
                [$0.placement, "\($0.entries)", "\($0.fresh)", "\($0.stale)", "\($0.bytes)", alias($0.alias)]
            })
    }
}

/// `cache list`: one row per flow entry, streamed in every format (a
/// listing of 100,000 entries never becomes one document in memory): `start`,
/// a `row` per entry, `end`, each handed to the caller's writer.
public struct FlowListing {
    public let format: OutputFormat
    public let now: Date
    private let stream = JSONDocument.Stream()
    private var table = AlignedRows(columns: FlowListing.columns)
    /// Where each slice of a batch's JSON or CSV rows is rendered, kept from batch to batch.
    private let slices = SliceBuffers()

    static let columns = ["placement", "user_id", "fingerprint", "flow_id", "version", "age", "ttl", "state", "size"]

    public init(format: OutputFormat, now: Date) {
        self.format = format
        self.now = now
    }

    /// What comes before the rows.
    public var start: Data {
        switch format {
        case .json: stream.start
        case .csv: Data(Table.csvLine(Self.columns).utf8)
        case .text: Data()
        }
    }

    /// Entries a caller hands to `rows` at once: enough for each core to
    /// render a slice of them, few enough that they hold little memory.
    public static let batch = 4_096

    /// Batches that wait, made, for the thread that renders them (`Handoff`'s capacity in `cache list`).
    public static let batchesWaiting = 1

    /// Entries, in order: their bytes now (JSON, CSV: each row depends on its
    /// entry and `now` alone, so slices of them are rendered on every core
    /// and joined in order, `Parallel.mapRanges`), or kept for the aligned
    /// table (text: in a scratch file past a few thousand rows, `AlignedRows`).
    public mutating func rows(_ entries: [CachedFlow]) throws -> [UInt8] {
        var out: [UInt8] = []
        try rows(entries.count, write: { out.append(contentsOf: $0) }, { entries[$0] })
        return out
    }

    /// A listing's batch of entries, in order, as `rows(_: [CachedFlow])`
    /// renders them: each entry's strings are made where its row is rendered.
    public mutating func rows(_ batch: ListedBatch) throws -> [UInt8] {
        var out: [UInt8] = []
        try rows(batch, write: { out.append(contentsOf: $0) })
        return out
    }

    /// `rows(_: ListedBatch)`'s bytes handed to `write` a slice at a time,
    /// from buffers the listing keeps from batch to batch (`SliceBuffers`):
    /// a listing of millions makes no array a batch.
    public mutating func rows(_ batch: ListedBatch, write: (UnsafeRawBufferPointer) throws -> Void) throws {
        try rows(batch.count, fields: batch, write: write, { batch.entry($0) })
    }

    /// `fields`: a batch whose format-2 entries' JSON rows are written from
    /// their records' bytes (`jsonRow`, the same bytes as from the
    /// entry), with no `CachedFlow` or string made.
    private mutating func rows(
        _ count: Int, fields: ListedBatch? = nil, write: (UnsafeRawBufferPointer) throws -> Void,
        _ entry: @Sendable (Int) -> CachedFlow?
    ) throws {
        guard count > 0 else { return }
        switch format {
        case .json, .csv:
            let (format, now, slices) = (self.format, self.now, self.slices)
            let pieces = Parallel.forEachRange(count, minimumPerSlice: 256, atMost: slices.count) { slice, range in
                slices.withEmptied(slice) { out in
                    out.reserveCapacity(range.count * 400)
                    for index in range {
                        if format == .json,
                            fields?.withFields(index, { Self.jsonRow($0, now: now, into: &out) }) != nil
                        {
                            continue
                        }
                        guard let e = entry(index) else { continue }
                        if format == .json {
                            Self.jsonRow(e, now: now, into: &out)
                        } else {
                            Table.csvLine(Self.cells(e, now: now), into: &out)
                        }
                    }
                }
            }
            for slice in 0..<pieces {
                try slices.withBytes(slice) { bytes in
                    guard !bytes.isEmpty else { return }
                    // Each JSON row comes after ",\n"; the listing's first after "\n" alone.
                    try write(format == .json && !started ? UnsafeRawBufferPointer(rebasing: bytes.dropFirst()) : bytes)
                    started = true
                }
            }
        case .text:
            for index in 0..<count {
                if let e = entry(index) { try table.add(Self.cells(e, now: now)) }
            }
        }
    }

    /// Whether a row has been rendered (JSON: the first has no comma before it).
    private var started = false

    /// One entry's JSON row after ",\n", written straight into `out`, from
    /// a `CachedFlow` (format 1) or from a format-2 record's bytes
    /// (`ListedFields`, no `CachedFlow` or string made): one writer, so the
    /// two give the same bytes (a test compares them). Each member's key and
    /// the punctuation around it are one constant fragment (`RowFragments`,
    /// in canonical key order); a listing of millions makes no dictionary,
    /// and no row buffer, a row.
    private static func jsonRow(_ e: some ListedRow, now: Date, into out: inout [UInt8]) {
        typealias F = RowFragments
        F.append(F.ageSeconds, to: &out)
        DecimalText.append(Int64(Int(now.timeIntervalSince(e.resolvedAt))), to: &out)
        F.append(F.fingerprint, to: &out)
        e.appendFingerprintHex(to: &out)
        F.append(F.flowID, to: &out)
        e.appendFlowID(to: &out)
        F.append(e.isFresh(at: now) ? F.freshTrue : F.freshFalse, to: &out)
        e.appendPlacement(to: &out)
        F.append(F.resolvedAt, to: &out)
        RFC3339.append(e.resolvedAt, to: &out)
        F.append(F.size, to: &out)
        DecimalText.append(e.size, to: &out)
        F.append(F.ttlSeconds, to: &out)
        DecimalText.append(Int64(e.ttlSeconds), to: &out)
        F.append(F.userID, to: &out)
        e.appendUserID(to: &out)
        F.append(F.version, to: &out)
        e.appendVersion(to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The constant bytes of a row (`jsonRow`): what comes before each
    /// member's value. Static strings, appended from where the binary holds
    /// them: no array to retain and release a member, as a struct of arrays
    /// copied a row cost (6% of `list`'s samples at ten million).
    private enum RowFragments {
        static let ageSeconds: StaticString = ",\n{\"age_seconds\":"
        static let fingerprint: StaticString = ",\"fingerprint\":\""
        static let flowID: StaticString = "\",\"flow_id\":"
        static let freshTrue: StaticString = ",\"fresh\":true,\"placement\":"
        static let freshFalse: StaticString = ",\"fresh\":false,\"placement\":"
        static let resolvedAt: StaticString = ",\"resolved_at\":\""
        static let size: StaticString = "\",\"size\":"
        static let ttlSeconds: StaticString = ",\"ttl_seconds\":"
        static let userID: StaticString = ",\"user_id\":"
        static let version: StaticString = ",\"version\":"

        @inline(__always)
        static func append(_ fragment: StaticString, to out: inout [UInt8]) {
            out.append(contentsOf: UnsafeBufferPointer(start: fragment.utf8Start, count: fragment.utf8CodeUnitCount))
        }
    }

    /// What comes after the rows, handed to `write` (the aligned table, for
    /// text: its widths need every row).
    public mutating func end(_ write: ([UInt8]) -> Void) throws {
        switch format {
        case .json: write(Array(stream.end()))
        case .csv: break
        case .text: try table.finish(write)
        }
    }

    private static func cells(_ e: CachedFlow, now: Date) -> [String] {
        [
            e.placement, e.userID ?? "-", String(e.fingerprint.prefix(12)), e.flowID, e.version,
            "\(Int(e.age(at: now)))s", "\(e.ttlSeconds)s", e.isFresh(at: now) ? "fresh" : "stale", "\(e.size)",
        ]
    }
}

/// `cache list --images`: one row per image.
public struct ImageListing: Rendering {
    public struct Row: Encodable {
        let url: String
        let size: Int64
        let ageSeconds: Int
        let lastAccess: Date
        let expired: Bool
    }

    public struct Document: Encodable { let rows: [Row] }

    public let document: Document

    public init(_ images: [CachedImage], now: Date, ttl: TimeInterval) {
        document = Document(
            rows: images.map {
                Row(
                    url: $0.url ?? "?", size: $0.size, ageSeconds: Int(now.timeIntervalSince($0.downloadedAt)),
                    lastAccess: $0.lastAccess, expired: $0.isExpired(at: now, ttl: ttl))
            }.sorted { $0.url < $1.url })
    }

    public func text() -> String { table?.text() ?? "" }

    public var table: Table? {
        Table(
            columns: ["url", "size", "age", "last_access", "expired"],
            rows: document.rows.map {
                [$0.url, "\($0.size)", "\($0.ageSeconds)s", RFC3339.string($0.lastAccess), $0.expired ? "yes" : "no"]
            })
    }
}

/// A file `prune`, `clear` or `verify --repair` could not remove, and why.
public struct NotRemoved: Encodable, Sendable {
    let path: String
    let reason: String
}

/// `cache prune`: the files removed (or that would be), and those that
/// could not be, written as they are read from the result's lists: a prune
/// of ten million entries is printed in the memory of a few thousand.
/// JSON: `{"bytes":N,"dry_run":B,"failed":[...],"files":N,"removed":[...],
/// "schema_version":1}`, each element of a non-empty array on a line of its
/// own, as `JSONDocument` lays out every document.
public struct PruneReport: OffersFormats {
    public let result: RemovalResult
    public let dryRun: Bool

    static let columns = ["kind", "path", "bytes", "reason"]

    public init(_ result: RemovalResult, dryRun: Bool) {
        self.result = result
        self.dryRun = dryRun
    }

    /// The report as `format` prints it, handed to `write` in pieces.
    public func write(as format: OutputFormat, _ write: ([UInt8]) -> Void) throws {
        switch format {
        case .text:
            try AlignedRows.write(columns: Self.columns, rows: result.removed, write)
        case .csv:
            var out: [UInt8] = []
            Table.csvLine(Self.columns, into: &out)
            try result.removed.each { removal in
                Table.csvLine(removal.cells, into: &out)
                if out.count >= 1 << 16 {
                    write(out)
                    out.removeAll(keepingCapacity: true)
                }
            }
            write(out)
        case .json:
            try json(write)
        }
    }

    private func json(_ write: ([UInt8]) -> Void) throws {
        var head = CanonicalJSON.SortedObject(capacity: 64)
        head.integer("bytes", Int(result.removedBytes))
        head.bool("dry_run", dryRun)
        var out = head.finishBytes()
        out.removeLast()  // its "}": the arrays and counts follow
        out.append(contentsOf: #","failed":"#.utf8)
        try Self.array(result.failed, into: &out, write) { failure in
            var row = CanonicalJSON.SortedObject(capacity: 128)
            row.string("path", failure.removal.path)
            row.string("reason", failure.reason)
            return row.finishBytes()
        }
        out.append(contentsOf: #","files":"#.utf8)
        DecimalText.append(Int64(result.removed.count), to: &out)
        out.append(contentsOf: #","removed":"#.utf8)
        try Self.array(result.removed, into: &out, write) { removal in
            var row = CanonicalJSON.SortedObject(capacity: 128)
            row.integer("bytes", Int(removal.bytes))
            row.string("kind", removal.kind.rawValue)
            row.string("path", removal.path)
            row.string("reason", removal.reason)
            return row.finishBytes()
        }
        out.append(contentsOf: #","schema_version":"#.utf8)
        DecimalText.append(Int64(JSONDocument.schemaVersion), to: &out)
        out.append(contentsOf: "}\n".utf8)
        write(out)
    }

    /// An array of objects as `JSONDocument` lays one out: `[]`, or each on a line of its own.
    private static func array<Element>(
        _ list: SpilledList<Element>, into out: inout [UInt8], _ write: ([UInt8]) -> Void,
        _ object: (Element) -> [UInt8]
    ) throws {
        guard !list.isEmpty else {
            out.append(contentsOf: "[]".utf8)
            return
        }
        out.append(UInt8(ascii: "["))
        var first = true
        try list.each { element in
            out.append(contentsOf: (first ? "\n" : ",\n").utf8)
            first = false
            out.append(contentsOf: object(element))
            if out.count >= 1 << 16 {
                write(out)
                out.removeAll(keepingCapacity: true)
            }
        }
        out.append(contentsOf: "\n]".utf8)
    }

    /// A line per file that could not be removed, for standard error.
    public func warnings(_ each: (String) -> Void) throws {
        try result.failed.each { each("could not remove \($0.removal.path): \($0.reason)") }
        let deferred = result.deferred
        if deferred > 0 {
            each(
                "\(deferred) \(deferred == 1 ? "entry" : "entries") old enough to go \(deferred == 1 ? "is" : "are") in a segment a writer is still appending to: the next prune removes \(deferred == 1 ? "it" : "them")"
            )
        }
    }

    /// The closing line, for standard error.
    public var summary: String {
        "\(dryRun ? "would remove" : "removed") \(result.removed.count) files, \(result.removedBytes) bytes"
            + (result.failed.isEmpty ? "" : "; could not remove \(result.failed.count)")
    }
}

/// `cache verify`: a finding per line, or `ok`. With --repair, `removed: `
/// before each finding whose file is gone, and `not removed (REASON): `
/// before one whose file could not be removed.
public struct VerifyReport: Rendering {
    public struct Document: Encodable {
        let clean: Bool
        let repaired: Bool
        let findings: [Finding]
        /// With --repair, the findings' files that could not be removed.
        let notRemoved: [NotRemoved]
    }

    public let document: Document
    /// `verification.notRemoved`: why a finding's file is still there, by its path.
    private let reasons: [String: String]

    public init(_ verification: CacheStore.Verification, repaired: Bool) {
        reasons = verification.notRemoved
        document = Document(
            clean: verification.findings.isEmpty, repaired: repaired, findings: verification.findings,
            notRemoved: verification.notRemoved.sorted { $0.key < $1.key }.map {
                NotRemoved(path: $0.key, reason: $0.value)
            })
    }

    /// Some file a finding named is still there after --repair.
    public var incomplete: Bool { !document.notRemoved.isEmpty }

    private func removal(_ finding: Finding) -> (Bool, String?) {
        guard document.repaired else { return (false, nil) }
        let reason = reasons[finding.path]
        return (reason == nil, reason)
    }

    public func text() -> String {
        if document.findings.isEmpty { return "ok\n" }
        return document.findings.map { finding in
            let (removed, reason) = removal(finding)
            let prefix = removed ? "removed: " : reason.map { "not removed (\($0)): " } ?? ""
            return prefix + finding.line + "\n"
        }.joined()
    }

    public var table: Table? {
        Table(
            columns: ["rule", "path", "message", "removed"],
            rows: document.findings.map { [$0.rule, $0.path, $0.message, String(removal($0).0)] })
    }
}

/// An entry as a listing's JSON row reads it (`FlowListing.jsonRow`): its
/// times and size, and its texts appended as JSON (a missing user id as
/// `null`), the fingerprint as hex.
protocol ListedRow: ResolvedWithTTL {
    var size: Int64 { get }
    func appendFingerprintHex(to out: inout [UInt8])
    func appendFlowID(to out: inout [UInt8])
    func appendPlacement(to out: inout [UInt8])
    func appendUserID(to out: inout [UInt8])
    func appendVersion(to out: inout [UInt8])
}

extension ListedFields: ListedRow {
    func appendFingerprintHex(to out: inout [UInt8]) { Digest.appendHex(fingerprint, to: &out) }
    func appendFlowID(to out: inout [UInt8]) { CanonicalJSON.appendString(utf8: flowID, to: &out) }
    func appendPlacement(to out: inout [UInt8]) { CanonicalJSON.appendString(utf8: placement, to: &out) }
    func appendUserID(to out: inout [UInt8]) { CanonicalJSON.appendString(utf8: userID, to: &out) }
    func appendVersion(to out: inout [UInt8]) { CanonicalJSON.appendString(utf8: version, to: &out) }
}

extension CachedFlow: ListedRow {
    /// A format-1 key directory's first 64 characters, escaped as JSON asks
    /// (a foreign directory's name need not be hex), inside the fragment's quotes.
    func appendFingerprintHex(to out: inout [UInt8]) {
        let start = out.count
        Self.append(fingerprint, to: &out)
        out.remove(at: start)
        out.removeLast()
    }
    func appendFlowID(to out: inout [UInt8]) { Self.append(flowID, to: &out) }
    func appendPlacement(to out: inout [UInt8]) { Self.append(placement, to: &out) }
    func appendUserID(to out: inout [UInt8]) {
        if let userID { Self.append(userID, to: &out) } else { out += "null".utf8 }
    }
    func appendVersion(to out: inout [UInt8]) { Self.append(version, to: &out) }

    private static func append(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { CanonicalJSON.appendString(utf8: UnsafeRawBufferPointer($0), to: &out) }
    }
}
