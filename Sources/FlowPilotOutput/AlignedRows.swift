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
    private var held: [[String]] = []
    private var spill: Int32 = -1
    private var pending: [UInt8] = []
    let inMemory: Int

    /// Rows held in memory before they go to the scratch file.
    public static let defaultInMemory = 16_384

    public init(columns: [String], inMemory: Int = AlignedRows.defaultInMemory) {
        self.columns = columns
        self.inMemory = inMemory
        widths = columns.map(\.count)
    }

    /// One row, its cells as `Table` takes them.
    public mutating func add(_ cells: [String]) throws {
        let row = cells.map(Printable.escaped)
        for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        if spill < 0 && held.count < inMemory {
            held.append(row)
            return
        }
        if spill < 0 {
            spill = try ScratchFile.open()
            for row in held { Self.encode(row, into: &pending) }
            held.removeAll()
        }
        Self.encode(row, into: &pending)
        if pending.count >= 1 << 20 { try flush() }
    }

    /// The table, header first, handed to `write` in pieces; the scratch file closed.
    public mutating func finish(_ write: ([UInt8]) -> Void) throws {
        defer {
            if spill >= 0 { close(spill) }
            spill = -1
        }
        var out: [UInt8] = []
        line(columns.map { $0.uppercased() }, into: &out)
        for row in held {
            line(row, into: &out)
            if out.count >= 1 << 16 {
                write(out)
                out.removeAll(keepingCapacity: true)
            }
        }
        if spill >= 0 {
            try flush()
            var offset = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var carry: [UInt8] = []
            while true {
                let n = buffer.withUnsafeMutableBytes { pread(spill, $0.baseAddress, $0.count, off_t(offset)) }
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else { throw FPError.cannotWrite("a table's temporary file: \(Errno.describe(errno))") }
                if n == 0 { break }
                offset += n
                carry += buffer[..<n]
                var at = 0
                while let (row, next) = Self.decode(carry, at: at) {
                    line(row, into: &out)
                    at = next
                    if out.count >= 1 << 16 {
                        write(out)
                        out.removeAll(keepingCapacity: true)
                    }
                }
                carry.removeFirst(at)
            }
            guard carry.isEmpty else { throw FPError.cannotWrite("a table's temporary file reads back short") }
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

    private mutating func flush() throws {
        if let failure = pending.withUnsafeBytes({ writeAll(spill, $0) }) {
            throw FPError.cannotWrite("a table's temporary file: \(Errno.describe(failure))")
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// A row as the scratch file holds it: its cell count, then each cell's length and bytes.
    private static func encode(_ row: [String], into out: inout [UInt8]) {
        appendLength(row.count, to: &out)
        for cell in row {
            appendLength(cell.utf8.count, to: &out)
            out.append(contentsOf: cell.utf8)
        }
    }

    private static func appendLength(_ value: Int, to out: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    /// The row encoded at `at`, and where the next starts; nil when `bytes` end before it does.
    private static func decode(_ bytes: [UInt8], at: Int) -> ([String], Int)? {
        func length(_ from: Int) -> Int? {
            guard bytes.count - from >= 4 else { return nil }
            return (0..<4).reduce(0) { $0 | Int(bytes[from + $1]) << (8 * $1) }
        }
        guard let count = length(at) else { return nil }
        var cells: [String] = []
        var next = at + 4
        for _ in 0..<count {
            guard let n = length(next), bytes.count - next - 4 >= n else { return nil }
            cells.append(String(decoding: bytes[(next + 4)..<(next + 4 + n)], as: UTF8.self))
            next += 4 + n
        }
        return (cells, next)
    }
}
