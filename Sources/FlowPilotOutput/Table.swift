import FlowPilotCore
import Foundation

/// Records rendered as an aligned text table or CSV with a header row.
public struct Table: Sendable {
    public var columns: [String]
    public var rows: [[String]]

    public init(columns: [String], rows: [[String]] = []) {
        self.columns = columns
        self.rows = rows
    }

    /// Columns padded to their widest cell, two spaces apart, header in
    /// capitals; control characters in a cell are escaped (`Printable`).
    public func text() -> String {
        let rows = self.rows.map { $0.map(Printable.escaped) }
        var widths = columns.map { $0.count }
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        var out = ""
        out.reserveCapacity((rows.count + 1) * (widths.reduce(0, +) + 2 * widths.count + 1))
        func line(_ cells: [String]) {
            for (i, c) in cells.enumerated() {
                out += c
                if i < cells.count - 1 { out += String(repeating: " ", count: max(0, widths[i] - c.count) + 2) }
            }
            out += "\n"
        }
        line(columns.map { $0.uppercased() })
        rows.forEach(line)
        return out
    }

    /// RFC 4180 CSV: quoted when a cell holds a comma, quote or newline.
    public func csv() -> String {
        ([columns] + rows).map(Self.csvLine).joined()
    }

    /// One CSV record and its newline, for a caller that streams rows;
    /// control characters in a cell are escaped (`Printable`).
    public static func csvLine(_ cells: [String]) -> String {
        var out: [UInt8] = []
        csvLine(cells, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `csvLine`'s bytes, appended to `out`: a row is written without a string made of each cell.
    public static func csvLine(_ cells: [String], into out: inout [UInt8]) {
        var row = CSVRow(into: out)
        for cell in cells { row.cell(cell) }
        out = row.end()
    }
}

/// One CSV record written cell by cell as bytes (`Table.csvLine`'s rules):
/// a streamed report's row with no array of cells and no string made of each.
public struct CSVRow {
    private var bytes: [UInt8]
    private var first = true

    /// A row appended to `bytes` (emptied and reused by a caller that writes many).
    public init(into bytes: [UInt8] = []) { self.bytes = bytes }

    /// A cell as it is when it is printable ASCII with no comma or quote
    /// (most are, checked byte by byte); else control characters escaped
    /// (`Printable`), and quoted when it holds a comma, quote or newline.
    public mutating func cell(_ text: String) {
        separate()
        var text = text
        let plain = text.withUTF8 { Self.appendPlain($0, to: &bytes) }
        if !plain { appendEscaped(text) }
    }

    /// The cell `first` + `separator` + `second` (UTF-8 bytes), without the
    /// string they make when it is plain.
    public mutating func cell(_ first: String, _ separator: UInt8, _ second: some Collection<UInt8>) {
        separate()
        let start = bytes.count
        var first = first
        let plain =
            first.withUTF8 { Self.appendPlain($0, to: &bytes) }
            && Self.appendPlain(CollectionOfOne(separator), to: &bytes)
            && Self.appendPlain(second, to: &bytes)
        if !plain {
            bytes.removeSubrange(start...)
            appendEscaped(
                first + String(decoding: [separator], as: UTF8.self) + String(decoding: second, as: UTF8.self))
        }
    }

    /// A number's cell, its digits written as they are made.
    public mutating func cell(_ number: Int) {
        separate()
        DecimalText.append(Int64(number), to: &bytes)
    }

    /// The row's bytes with its newline.
    public consuming func end() -> [UInt8] {
        bytes.append(0x0A)
        return bytes
    }

    private mutating func separate() {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
    }

    private static func appendPlain(_ cell: some Collection<UInt8>, to bytes: inout [UInt8]) -> Bool {
        guard cell.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "\"") })
        else { return false }
        bytes.append(contentsOf: cell)
        return true
    }

    private mutating func appendEscaped(_ cell: String) {
        let escaped = Printable.escaped(cell)
        let quoted =
            escaped.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
            ? "\"" + escaped.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : escaped
        bytes.append(contentsOf: quoted.utf8)
    }
}
