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
        for (index, cell) in cells.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            // Most cells are printable ASCII without a comma or quote: as they are, checked byte by byte.
            var text = cell
            let plain = text.withUTF8 { bytes in
                guard
                    bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "\"") })
                else { return false }
                out.append(contentsOf: bytes)
                return true
            }
            if plain { continue }
            let escaped = Printable.escaped(cell)
            let quoted =
                escaped.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                ? "\"" + escaped.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : escaped
            out.append(contentsOf: quoted.utf8)
        }
        out.append(0x0A)
    }
}
