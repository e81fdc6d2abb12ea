import FlowPilotCore
import Foundation

/// Where a streamed renderer's bytes go: written in order, and pushed to the
/// file or pipe at `flush` (fpctl's standard output).
public protocol OutputSink: AnyObject {
    func write(_ data: Data)
    /// The same as `write(Data(bytes))`, for a sink that can take bytes without making a `Data`.
    func write(bytes: [UInt8])
    func flush()
}

extension OutputSink {
    func write(_ text: String) { write(Data(text.utf8)) }
    public func write(bytes: [UInt8]) { write(Data(bytes)) }
}

/// Warm's standard output, streamed: rows are written as identities finish, so
/// a million identities never sit in memory, then the per-placement summary.
/// - text: the rows, then (when the run covered more than one identity) a
///   blank line and the summary table; with `--summary`, the summary only.
/// - csv: the rows (one table per CSV stream); with `--summary`, the summary only.
/// - json: `{"rows":[` one row per line `],"run":{…},"schema_version":1,"summary":{…}}`,
///   the run and summary on the last line (what `fpctl report` reads back);
///   with `--summary`, no `rows`.
public final class OutcomeReport {
    public let format: OutputFormat
    public let showRows: Bool
    private let out: any OutputSink
    private var document: WarmOutputFile.Writer
    /// A CSV row's bytes, the buffer kept from row to row.
    private var rowBytes: [UInt8] = []
    static let columns = [
        "identity", "placement", "state", "from_cache", "delivery_source", "media_warmed", "flow", "version", "ttl",
        "ms",
        "error",
    ]
    static let widths = [22, 16, 8, 10, 15, 12, 20, 12, 5, 6]

    public init(format: OutputFormat, rows: Bool, to out: any OutputSink) {
        self.out = out
        self.format = format
        self.showRows = rows
        document = WarmOutputFile.Writer(rows: rows)
        guard rows else { return }
        switch format {
        case .json:
            // Written at once, and each identity's rows as it finishes
            // (`identityDone`): what a killed run leaves is what --resume reads.
            out.write(document.start)
        case .csv: out.write(Self.columns.joined(separator: ",") + "\n")
        case .text: out.write(line(Self.columns.map { $0.uppercased() }))
        }
        out.flush()
    }

    public func add(_ o: PrefetchOutcome) {
        guard showRows else { return }
        let identity = o.identity
        let user = identity.userID.isEmpty ? "(anonymous)" : identity.userID
        let error = o.failure?.description ?? ""
        switch format {
        case .text:
            let cells = [
                "\(user) \(identity.fingerprint.prefix(8))", o.placement, o.state.rawValue,
                o.state == .warmed ? String(o.fromCache) : "",
                o.deliverySource?.rawValue ?? "", String(o.mediaWarmed), o.flowID ?? "", o.version ?? "",
                o.ttlSeconds.map(String.init) ?? "", String(o.milliseconds), error,
            ]
            out.write(line(cells))
        case .csv:
            // The same cells as text's, written as bytes into one buffer reused for every row: taken
            // out of `rowBytes` first, so the row holds the only reference and appends in place.
            var buffer: [UInt8] = []
            swap(&buffer, &rowBytes)
            var row = CSVRow(into: buffer)
            // A fingerprint is hex: its first 8 characters are its first 8 bytes.
            var fingerprint = identity.fingerprint
            fingerprint.withUTF8 { row.cell(user, UInt8(ascii: " "), UnsafeBufferPointer(rebasing: $0.prefix(8))) }
            row.cell(o.placement)
            row.cell(o.state.rawValue)
            row.cell(o.state == .warmed ? (o.fromCache ? "true" : "false") : "")
            row.cell(o.deliverySource?.rawValue ?? "")
            row.cell(o.mediaWarmed ? "true" : "false")
            row.cell(o.flowID ?? "")
            row.cell(o.version ?? "")
            if let ttl = o.ttlSeconds { row.cell(ttl) } else { row.cell("") }
            row.cell(o.milliseconds)
            row.cell(error)
            rowBytes = row.end()
            out.write(bytes: rowBytes)
            rowBytes.removeAll(keepingCapacity: true)
        case .json: out.write(document.row(o))
        }
    }

    /// An identity's rows are all added: they reach the file or pipe now, in
    /// every format, so a reader sees rows as identities finish and a killed
    /// run loses at most the identities in flight (what --resume reads).
    public func identityDone() {
        if showRows { out.flush() }
    }

    /// The summary after the rows (see the type's comment for when).
    public func finish(run: WarmRunInfo, summary: OutcomeSummary, identities: Int) {
        switch format {
        case .json:
            out.write(document.finish(run: run, summary: summary))
        case .csv where !showRows:
            out.write(summary.table().csv())
        case .text where !showRows:
            out.write(summary.table().text())
        case .text where identities > 1:
            out.write("\n" + summary.table().text())
        case .csv, .text:
            break
        }
        out.flush()
    }

    private func line(_ cells: [String]) -> String {
        var s = ""
        for (i, c) in cells.enumerated() {
            let c = Printable.escaped(c)
            s += c
            if i < Self.widths.count { s += String(repeating: " ", count: max(1, Self.widths[i] - c.count + 1)) }
        }
        return s.trimmingCharacters(in: .whitespaces) + "\n"
    }
}

extension OutcomeReport: OffersFormats {}
