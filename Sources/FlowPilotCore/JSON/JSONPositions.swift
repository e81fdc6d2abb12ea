import Foundation

/// Where each value of a parsed JSON text starts, recorded by the parser as it
/// parses (`JSONValue.parse(_:positions:)`): for a JSON pointer, the line and
/// column a person opens in an editor. A pointer past what the text has (a
/// missing key) names the deepest value it reaches: for a missing key, the
/// object that lacks it.
///
/// The values are kept in document order (pre-order), three integers each: the
/// byte offset where the value starts, the offset of its key when it is an
/// object's member, and the index just past its last descendant, so a lookup
/// walks siblings without parsing again. Lines and columns are counted only
/// for the values a finding names.
public struct JSONPositions: Sendable {
    /// Line and column, both from 1; the column counts Unicode scalars (`SourcePosition`).
    public typealias Position = SourcePosition

    struct Recorder {
        var start: [UInt32] = []
        var key: [UInt32] = []
        var end: [UInt32] = []

        mutating func open(offset: Int, key keyOffset: UInt32) -> Int {
            start.append(UInt32(truncatingIfNeeded: offset))
            key.append(keyOffset)
            end.append(0)
            return start.count - 1
        }

        mutating func close(_ index: Int) { end[index] = UInt32(truncatingIfNeeded: start.count) }
    }

    private let recorded: Recorder
    private let text: Data

    init(recorded: Recorder, text: Data) {
        self.recorded = recorded
        self.text = text
    }

    /// The position of the value `pointer` (RFC 6901: `/screens/0/id`) names,
    /// or of the deepest value on its way that the text has.
    public func position(of pointer: Substring) -> Position {
        var lookup = Lookup(self)
        return lookup.position(of: pointer)
    }

    /// Pointer lookups over one text that remember each container's children
    /// once listed, so that locating every finding of a flow (15,000 duplicate
    /// screen ids, say) costs the size of the flow, not its square.
    public struct Lookup {
        let positions: JSONPositions
        /// Counted on the first lookup: a parse with no findings never counts lines.
        private var lines: TextLines?
        private var elements: [Int: [Int]] = [:]
        /// An object's members by their keys' bytes, as `JSONValue.object` keys them.
        private var members: [Int: [ExactName: Int]] = [:]

        public init(_ positions: JSONPositions) { self.positions = positions }

        public mutating func position(of pointer: Substring) -> Position {
            let offset = offset(of: pointer)
            if lines == nil { lines = TextLines(positions.text) }
            return lines?.position(ofOffset: offset) ?? Position(line: 1, column: 1)
        }

        /// The byte offset of the value `pointer` names, or of the deepest on its way.
        mutating func offset(of pointer: Substring) -> Int {
            let recorded = positions.recorded
            guard !recorded.start.isEmpty else { return 0 }
            var node = 0
            let tokens =
                pointer.isEmpty ? [] : pointer.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            for raw in tokens {
                let token = raw.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
                guard let child = child(of: node, named: token) else { break }
                node = child
            }
            return Int(recorded.start[node])
        }

        /// The member `name` of an object, or the element at index `name` of an array.
        private mutating func child(of node: Int, named name: String) -> Int? {
            let recorded = positions.recorded
            let end = Int(recorded.end[node])
            guard node + 1 < end else { return nil }
            if recorded.key[node + 1] == .max {
                if elements[node] == nil {
                    var list: [Int] = []
                    var child = node + 1
                    while child < end {
                        list.append(child)
                        child = Int(recorded.end[child])
                    }
                    elements[node] = list
                }
                guard let index = Int(name), let list = elements[node], list.indices.contains(index) else { return nil }
                return list[index]
            }
            if members[node] == nil {
                var map: [ExactName: Int] = [:]
                var child = node + 1
                positions.text.withUnsafeBytes { text in
                    while child < end {
                        if let key = JSONParser.string(at: Int(recorded.key[child]), of: text) {
                            map[ExactName(key)] = child
                        }
                        child = Int(recorded.end[child])
                    }
                }
                members[node] = map
            }
            return members[node]?[ExactName(name)]
        }
    }

}

/// Line and column of a byte offset in a UTF-8 text, in one pass over it:
/// where lines start, and how many scalars come before every 4 KiB, so that a
/// column on a line of megabytes (a minified flow) costs at most 4 KiB of counting.
public struct TextLines: Sendable {
    private let text: Data
    private let starts: [Int]
    /// Scalars in `text[0 ..< k * stride]`, for every k.
    private let scalarsBefore: [Int]
    private static let stride = 4096

    public init(_ text: Data) {
        self.text = text
        var starts = [0]
        var checkpoints: [Int] = []
        checkpoints.reserveCapacity(text.count / Self.stride + 1)
        var scalars = 0
        text.withUnsafeBytes { raw in
            for (i, byte) in raw.enumerated() {
                if i % Self.stride == 0 { checkpoints.append(scalars) }
                if byte & 0xC0 != 0x80 { scalars += 1 }
                if byte == 0x0A { starts.append(i + 1) }
            }
        }
        if checkpoints.isEmpty { checkpoints.append(0) }
        self.starts = starts
        scalarsBefore = checkpoints
    }

    /// Scalars before byte `offset`.
    private func scalars(before offset: Int) -> Int {
        let offset = max(0, min(offset, text.count))
        let block = min(offset / Self.stride, scalarsBefore.count - 1)
        return text.withUnsafeBytes { raw in
            raw[block * Self.stride..<offset].reduce(scalarsBefore[block]) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
        }
    }

    public func position(ofOffset offset: Int) -> JSONPositions.Position {
        // The last line start at or before the offset.
        var low = 0
        var high = starts.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if starts[mid] <= offset { low = mid } else { high = mid - 1 }
        }
        let column = scalars(before: offset) - scalars(before: starts[low])
        return .init(line: low + 1, column: max(0, column) + 1)
    }
}

extension JSONValue.ParseError {
    /// The line and column in `text` where it stops being JSON.
    public func position(in text: Data) -> JSONPositions.Position? {
        offset.map { TextLines(text).position(ofOffset: $0) }
    }
}

extension JSONValue {
    /// `parse(_:)`, also recording where every value starts (`JSONPositions`),
    /// in the same pass.
    public static func parse(_ data: Data, positions: Bool) throws -> (JSONValue, JSONPositions?) {
        try JSONParser.parse(data, positions: positions)
    }
}

extension Array where Element == Finding {
    /// Gives each finding about the JSON text at `file` the line and column
    /// of the value its pointer names (for one with no pointer, the start of
    /// the text), from the positions its parse recorded.
    public mutating func locate(_ file: String, with positions: JSONPositions) {
        var lookup = JSONPositions.Lookup(positions)
        for i in indices where self[i].position == nil && self[i].file == file {
            self[i].position = lookup.position(of: self[i].pointer)
        }
    }
}
