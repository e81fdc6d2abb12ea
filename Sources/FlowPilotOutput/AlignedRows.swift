import FlowPilotCore
import Foundation

/// `Table.text()`'s aligned table for any number of rows, in memory that
/// does not grow with them: each row's cells escaped and measured as it
/// comes; up to `inMemory` rows held, past that every row written to a
/// scratch file (`ScratchFile`) and read back, in order, once the widths of
/// all are known. What `cache list` prints as text for ten million entries.
public struct AlignedRows {
    public let columns: [String]
    private var widths: [Int]
    private let rows: SpilledList<[String]>

    /// Rows held in memory before they go to the scratch file.
    public static let defaultInMemory = SpilledList<[String]>.defaultInMemory

    public init(columns: [String], inMemory: Int = AlignedRows.defaultInMemory) {
        self.columns = columns
        rows = SpilledList(inMemory: inMemory)
        widths = columns.map(\.count)
    }

    /// One row, its cells as `Table` takes them.
    public mutating func add(_ cells: [String]) throws {
        let row = cells.map(Printable.escaped)
        for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        try rows.append(row)
    }

    /// The table, header first, handed to `write` in pieces.
    public func finish(_ write: ([UInt8]) -> Void) throws {
        var out: [UInt8] = []
        line(columns.map { $0.uppercased() }, into: &out)
        try rows.each { row in
            line(row, into: &out)
            if out.count >= 1 << 16 {
                write(out)
                out.removeAll(keepingCapacity: true)
            }
        }
        write(out)
    }

    /// The table of `rows`, a list that can be read twice: the widths from
    /// the first reading, the lines from the second, no row held meanwhile.
    public static func write<Row: SpilledRow>(
        columns: [String], rows: SpilledList<Row>, _ write: ([UInt8]) -> Void
    ) throws {
        var table = AlignedRows(columns: columns, inMemory: 0)
        try rows.each { row in
            for (i, cell) in row.cells.enumerated() where i < table.widths.count {
                table.widths[i] = max(table.widths[i], Printable.escaped(cell).count)
            }
        }
        var out: [UInt8] = []
        table.line(columns.map { $0.uppercased() }, into: &out)
        try rows.each { row in
            table.line(row.cells.map(Printable.escaped), into: &out)
            if out.count >= 1 << 16 {
                write(out)
                out.removeAll(keepingCapacity: true)
            }
        }
        write(out)
    }

    private func line(_ cells: [String], into out: inout [UInt8]) {
        for (i, cell) in cells.enumerated() {
            out.append(contentsOf: cell.utf8)
            if i < cells.count - 1 {
                let pad = (i < widths.count ? max(0, widths[i] - cell.count) : 0) + 2
                out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: pad))
            }
        }
        out.append(UInt8(ascii: "\n"))
    }
}
