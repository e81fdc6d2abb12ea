import Foundation

/// A value `SpilledList` keeps as a row of strings.
public protocol SpilledRow {
    var cells: [String] { get }
    init?(cells: [String])
}

extension Array: SpilledRow where Element == String {
    public var cells: [String] { self }
    public init?(cells: [String]) { self = cells }
}

/// A list that is appended to and then read, in order, any number of times,
/// in memory that does not grow with it: up to `inMemory` elements held,
/// past that every one written to a scratch file (`ScratchFile`) as its
/// cells (a count, then each cell's length and bytes, little-endian 32-bit)
/// and read back a megabyte at a time. What a prune that removes ten
/// million entries reports, and what an aligned table waits in.
public final class SpilledList<Element: SpilledRow> {
    /// Elements held in memory before they go to the scratch file.
    public static var defaultInMemory: Int { 16_384 }

    public let inMemory: Int
    public private(set) var count = 0
    private var held: [Element] = []
    private var spill: Int32 = -1
    private var pending: [UInt8] = []
    private var written = 0

    public init(inMemory: Int = SpilledList.defaultInMemory) {
        self.inMemory = inMemory
    }

    deinit { if spill >= 0 { close(spill) } }

    public var isEmpty: Bool { count == 0 }

    public func append(_ element: Element) throws {
        count += 1
        if spill < 0 && held.count < inMemory {
            held.append(element)
            return
        }
        if spill < 0 {
            spill = try ScratchFile.open()
            for element in held { Self.encode(element.cells, into: &pending) }
            held.removeAll()
        }
        Self.encode(element.cells, into: &pending)
        if pending.count >= 1 << 20 { try flush() }
    }

    /// Each element, in the order appended.
    public func each(_ body: (Element) throws -> Void) throws {
        guard spill >= 0 else {
            try held.forEach(body)
            return
        }
        try flush()
        var offset = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var carry: [UInt8] = []
        while offset < written {
            let n = buffer.withUnsafeMutableBytes { pread(spill, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Self.failure(n < 0 ? Errno.describe(errno) : "it reads back short") }
            offset += n
            carry += buffer[..<n]
            var at = 0
            while let (cells, next) = Self.decode(carry, at: at) {
                guard let element = Element(cells: cells) else { throw Self.failure("a row reads back damaged") }
                try body(element)
                at = next
            }
            carry.removeFirst(at)
        }
        guard carry.isEmpty else { throw Self.failure("it reads back short") }
    }

    /// Every element, in an array: for a list known to be small (a test's).
    public func array() throws -> [Element] {
        var all: [Element] = []
        try each { all.append($0) }
        return all
    }

    private func flush() throws {
        guard !pending.isEmpty else { return }
        if let failure = pending.withUnsafeBytes({ writeAll(spill, $0) }) {
            throw Self.failure(Errno.describe(failure))
        }
        written += pending.count
        pending.removeAll(keepingCapacity: true)
    }

    private static func failure(_ why: String) -> FPError {
        FPError.cannotWrite("a temporary file of rows (TMPDIR): \(why)")
    }

    private static func encode(_ cells: [String], into out: inout [UInt8]) {
        appendLength(cells.count, to: &out)
        for cell in cells {
            appendLength(cell.utf8.count, to: &out)
            out.append(contentsOf: cell.utf8)
        }
    }

    private static func appendLength(_ value: Int, to out: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    /// The cells encoded at `at`, and where the next row starts; nil when `bytes` end before it does.
    private static func decode(_ bytes: [UInt8], at: Int) -> ([String], Int)? {
        func length(_ from: Int) -> Int? {
            guard bytes.count - from >= 4 else { return nil }
            return (0..<4).reduce(0) { $0 | Int(bytes[from + $1]) << (8 * $1) }
        }
        guard let count = length(at) else { return nil }
        var cells: [String] = []
        cells.reserveCapacity(count)
        var next = at + 4
        for _ in 0..<count {
            guard let n = length(next), bytes.count - next - 4 >= n else { return nil }
            cells.append(String(decoding: bytes[(next + 4)..<(next + 4 + n)], as: UTF8.self))
            next += 4 + n
        }
        return (cells, next)
    }
}
