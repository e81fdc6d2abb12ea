import Foundation

/// A strict RFC 8259 parser straight from UTF-8 bytes into `JSONValue`.
///
/// Foundation's JSONDecoder would need a trial decode per type for an untyped
/// value (each failure an error thrown and caught), which made validating a few
/// hundred flows cost more than hashing 70 MB; this parses each byte once.
struct JSONParser {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0
    /// Where each value starts, when the caller asked (`parse(_:positions:)`).
    private var positions: JSONPositions.Recorder?
    /// The offset of the key of the member whose value comes next.
    private var keyOffset = UInt32.max
    /// `parseKeepingRaw`'s values known already (`KnownValues`), if any.
    private var known: (any KnownValues)?
    static let maxDepth = 512

    static func parse(_ data: Data) throws -> JSONValue {
        try data.withUnsafeBytes { try parse(bytes: $0) }
    }

    static func parse(bytes raw: UnsafeRawBufferPointer) throws -> JSONValue {
        var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self))
        parser.skipWhitespace()
        let value = try parser.value()
        try parser.end()
        return value
    }

    /// `parse(_:)` that also records where every value starts, in the same
    /// pass: a flow read from a source directory, whose findings name the line
    /// and column of the value they are about.
    static func parse(_ data: Data, positions: Bool) throws -> (JSONValue, JSONPositions?) {
        guard positions else { return (try parse(data), nil) }
        return try data.withUnsafeBytes { raw in
            var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self))
            parser.positions = JSONPositions.Recorder()
            parser.skipWhitespace()
            let value = try parser.value()
            try parser.end()
            return (value, parser.positions.map { JSONPositions(recorded: $0, text: data) })
        }
    }

    /// Nothing but whitespace may follow the document's value.
    private mutating func end() throws {
        skipWhitespace()
        guard i == bytes.count else { throw error("unexpected content after the JSON value") }
    }

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private func error(_ message: String) -> JSONValue.ParseError {
        JSONValue.ParseError(message: "not valid JSON: \(message) at byte \(i)", offset: i)
    }

    private mutating func skipWhitespace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    private mutating func value() throws -> JSONValue {
        guard i < bytes.count else { throw error("unexpected end of input") }
        guard positions != nil else { return try scalarOrContainer() }
        let index = positions?.open(offset: i, key: keyOffset) ?? 0
        keyOffset = .max
        let value = try scalarOrContainer()
        positions?.close(index)
        return value
    }

    private mutating func scalarOrContainer() throws -> JSONValue {
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw error("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString) throws {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw error("unexpected end of input") }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw error("invalid literal") }
        i += n
    }

    private mutating func nest() throws {
        depth += 1
        if depth > Self.maxDepth { throw error("nested deeper than \(Self.maxDepth) levels") }
    }

    private mutating func object() throws -> JSONValue {
        var members: [ExactName: JSONValue] = [:]
        // Room for the common small object at once, not a regrowth at its second
        // and fourth members.
        members.reserveCapacity(4)
        try self.members { key, value in members.updateValue(value, forKey: ExactName(key)) == nil }
        return .object(members)
    }

    /// The members of a top-level object in document order, duplicate keys
    /// refused as everywhere: for a reader of a few known keys (a resolve
    /// body), which needs no dictionary of them.
    static func parseMembers(bytes raw: UnsafeRawBufferPointer) throws -> [(key: String, value: JSONValue)] {
        var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self))
        parser.skipWhitespace()
        guard parser.i < parser.bytes.count, parser.bytes[parser.i] == UInt8(ascii: "{") else {
            throw parser.error("expected an object")
        }
        var members: [(key: String, value: JSONValue)] = []
        // Keys are compared one by one while there are few; past that, a set
        // keeps a body of many keys from costing their square.
        // Keys are their bytes (`ExactName`): two spellings of "café" are two keys.
        var keys: Set<ExactName> = []
        try parser.members { key, value in
            if members.count < 16 {
                if members.contains(where: { $0.key.sameBytes(as: key) }) { return false }
            } else {
                if keys.isEmpty { keys = Set(members.map { ExactName($0.key) }) }
                if !keys.insert(ExactName(key)).inserted { return false }
            }
            members.append((key, value))
            return true
        }
        try parser.end()
        return members
    }

    /// An object whose `raw` member is not parsed but passed over, its bytes'
    /// range kept (`JSONObjectRaw`); every other member parsed as usual.
    /// `nested` names a member that is an array of such objects (a batch
    /// answer's `results`), read the same way.
    ///
    /// `known` (`FlowMemo`) may name the raw member's extent at once: a value
    /// whose bytes it holds, and which the bytes there begin with, ends where
    /// those bytes end (a JSON value's extent is decided by its own bytes), so
    /// it is not passed over byte by byte.
    static func parseKeepingRaw(
        bytes raw: UnsafeRawBufferPointer, member: String, nested: String? = nil, known: (any KnownValues)? = nil
    ) throws -> JSONObjectRaw {
        var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self))
        parser.known = known
        parser.skipWhitespace()
        let object = try parser.objectKeepingRaw(member: member, nested: nested)
        try parser.end()
        return object
    }

    private mutating func objectKeepingRaw(member: String, nested: String?) throws -> JSONObjectRaw {
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { throw error("expected an object") }
        var object = JSONObjectRaw()
        try members(
            value: { parser, key in
                if key.sameBytes(as: member) {
                    object.raw = try parser.knownValue() ?? parser.skipValue()
                    return .null
                }
                if let nested, key.sameBytes(as: nested), parser.i < parser.bytes.count,
                    parser.bytes[parser.i] == UInt8(ascii: "[")
                {
                    object.items = try parser.arrayKeepingRaw(member: member)
                    return .null
                }
                return try parser.value()
            },
            add: { key, value in object.members.add(key, value) })
        // The placeholders (null) stand for members kept apart; a duplicate of one was refused by `add`.
        if object.raw != nil { object.members.remove(member) }
        if let nested, object.items != nil { object.members.remove(nested) }
        return object
    }

    private mutating func arrayKeepingRaw(member: String) throws -> [JSONObjectRaw] {
        var items: [JSONObjectRaw] = []
        try elements { parser in
            if parser.i < parser.bytes.count, parser.bytes[parser.i] == UInt8(ascii: "{") {
                items.append(try parser.objectKeepingRaw(member: member, nested: nil))
            } else {
                // Not an object: an item with no members (a result without a placement_key), its value kept.
                var item = JSONObjectRaw()
                item.other = try parser.value()
                items.append(item)
            }
        }
        return items
    }

    /// Passes over the value at `i` and returns its bytes' range. Only the
    /// structure is followed (brackets, and strings with their escapes): the
    /// bytes are checked by whoever reads them (`FlowMemo` parses bytes it has
    /// not seen before; bytes it has are those of a value that parsed).
    private mutating func skipValue() throws -> Range<Int> {
        var deepest = 0
        return try skipValue(deepest: &deepest)
    }

    /// The extent of the value at `i` when `known` holds bytes it begins
    /// with, nested no deeper than `skipValue` allows here; `i` moved past it.
    private mutating func knownValue() -> Range<Int>? {
        guard let known, let base = bytes.baseAddress, i < bytes.count,
            let (length, nesting) = known.prefix(of: UnsafeRawBufferPointer(start: base + i, count: bytes.count - i)),
            length > 0, nesting <= Self.maxDepth - depth
        else { return nil }
        defer { i += length }
        return i..<(i + length)
    }

    /// How deeply the one JSON value `bytes` holds nests its containers, as
    /// `skipValue` counts them (a known value's nesting, for `knownValue`);
    /// nil when the bytes are not one value that `skipValue` passes over whole.
    static func nesting(of raw: UnsafeRawBufferPointer) -> Int? {
        var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self))
        var deepest = 0
        guard let range = try? parser.skipValue(deepest: &deepest), range == 0..<raw.count else { return nil }
        return deepest
    }

    /// `skipValue`, the deepest nesting of its containers in `deepest`.
    private mutating func skipValue(deepest: inout Int) throws -> Range<Int> {
        let start = i
        guard i < bytes.count else { throw error("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var open = 0
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    open += 1
                    deepest = max(deepest, open)
                    if open > Self.maxDepth - depth { throw error("nested deeper than \(Self.maxDepth) levels") }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    open -= 1
                    if open == 0 {
                        i += 1
                        return start..<i
                    }
                case UInt8(ascii: "\""):
                    try skipString()
                    continue
                default: break
                }
                i += 1
            }
            throw error("unexpected end of input")
        default:
            _ = try scalarOrContainer()
            return start..<i
        }
    }

    /// Passes over the string at `i` (its quotes and escapes; nothing decoded).
    /// The next quote is found with memchr, then the span before it checked
    /// for a backslash: an escaped character is stepped over and the search
    /// goes on after it.
    private mutating func skipString() throws {
        i += 1
        guard let base = bytes.baseAddress else { throw error("unterminated string") }
        while i < bytes.count {
            guard let quote = memchr(base + i, Int32(UInt8(ascii: "\"")), bytes.count - i) else { break }
            let end = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(quote))
            if let escape = memchr(base + i, Int32(UInt8(ascii: "\\")), end - i) {
                i = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(escape)) + 2
                continue
            }
            i = end + 1
            return
        }
        throw error("unterminated string")
    }

    /// Parses the object at `i`, handing each member to `add`, which answers
    /// false for a key the object already has.
    private mutating func members(_ add: (String, JSONValue) -> Bool) throws {
        try members(value: { parser, _ in try parser.value() }, add: add)
    }

    /// As above, each member's value read by `value` (given the key).
    private mutating func members(
        value readValue: (inout JSONParser, String) throws -> JSONValue, add: (String, JSONValue) -> Bool
    ) throws {
        try nest()
        i += 1
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
            i += 1
            depth -= 1
            return
        }
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let keyStart = i
            let key = try string()
            if positions != nil { keyOffset = UInt32(truncatingIfNeeded: keyStart) }
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw error("expected ':'") }
            i += 1
            skipWhitespace()
            let v = try readValue(&self, key)
            if !add(key, v) { throw error("duplicate key \"\(key)\"") }
            skipWhitespace()
            guard i < bytes.count else { throw error("unexpected end of input") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "}") {
                i += 1
                depth -= 1
                return
            }
            throw error("expected ',' or '}'")
        }
    }

    private mutating func array() throws -> JSONValue {
        var items: [JSONValue] = []
        try elements { parser in items.append(try parser.value()) }
        return .array(items)
    }

    /// Parses the array at `i`, `element` reading each of its elements.
    private mutating func elements(_ element: (inout JSONParser) throws -> Void) throws {
        try nest()
        i += 1
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
            i += 1
            depth -= 1
            return
        }
        while true {
            skipWhitespace()
            try element(&self)
            skipWhitespace()
            guard i < bytes.count else { throw error("unexpected end of input") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "]") {
                i += 1
                depth -= 1
                return
            }
            throw error("expected ',' or ']'")
        }
    }

    /// The string token at `offset` of `text` (an object key a pointer names).
    static func string(at offset: Int, of text: UnsafeRawBufferPointer) -> String? {
        var parser = JSONParser(bytes: text.bindMemory(to: UInt8.self))
        parser.i = offset
        guard offset < parser.bytes.count, parser.bytes[offset] == UInt8(ascii: "\"") else { return nil }
        return try? parser.string()
    }

    private mutating func string() throws -> String {
        i += 1
        let start = i
        // Fast path: no escapes. ASCII needs no validation; `String(validating:as:)`
        // is generic in the standard library, and its metadata lookups cost more
        // than the scan (a resolve body is a handful of short ASCII strings).
        var high: UInt8 = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                let s =
                    high < 0x80
                    ? String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
                    : try validUTF8(start, i)
                i += 1
                return s
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw error("control character in string") }
            high |= b
            i += 1
        }
        var out = Array(bytes[start..<i])
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                i += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8 in string") }
                return s
            }
            if b < 0x20 { throw error("control character in string") }
            if b != UInt8(ascii: "\\") {
                out.append(b)
                i += 1
                continue
            }
            i += 1
            guard i < bytes.count else { break }
            try unescape(into: &out)
        }
        throw error("unterminated string")
    }

    /// One escape sequence after its backslash, appended to `out` as UTF-8.
    private mutating func unescape(into out: inout [UInt8]) throws {
        let e = bytes[i]
        i += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"): out.append(contentsOf: Array(String(try unicodeEscape()).utf8))
        default: throw error("invalid escape")
        }
    }

    /// `\uXXXX`, or a surrogate pair of them, as one scalar.
    private mutating func unicodeEscape() throws -> Unicode.Scalar {
        var scalar = try hex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                throw error("unpaired surrogate")
            }
            i += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw error("unpaired surrogate")
        }
        // Surrogates were paired or refused above, so this is always a scalar.
        guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid escape") }
        return unicode
    }

    private func validUTF8(_ from: Int, _ to: Int) throws -> String {
        guard let s = String(validating: UnsafeBufferPointer(rebasing: bytes[from..<to]), as: UTF8.self) else {
            throw error("invalid UTF-8 in string")
        }
        return s
    }

    private mutating func hex4() throws -> UInt32 {
        guard i + 4 <= bytes.count else { throw error("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let d: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw error("invalid \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    /// A number: digits alone that fit 64 bits are an exact `integer`
    /// (`JSONValue`); `-0`, a fraction or an exponent make a double.
    private mutating func number() throws -> JSONValue {
        let start = i
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < bytes.count else { throw error("invalid number") }
        // Accumulated negatively, so Int64.min's digits fit too.
        var integer: Int64? = 0
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if negative { integer = nil }
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[i]) {
            while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
                if let n = integer {
                    let (times, o1) = n.multipliedReportingOverflow(by: 10)
                    let (next, o2) = times.subtractingReportingOverflow(Int64(bytes[i] - UInt8(ascii: "0")))
                    integer = o1 || o2 ? nil : next
                }
                i += 1
            }
        } else {
            throw error("invalid number")
        }
        let whole = i == bytes.count || (bytes[i] != UInt8(ascii: ".") && bytes[i] | 0x20 != UInt8(ascii: "e"))
        if whole, let n = integer {
            if negative { return .integer(n) }
            if n != .min { return .integer(-n) }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            let digits = i
            while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
            if i == digits { throw error("invalid number") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            let digits = i
            while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
            if i == digits { throw error("invalid number") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw error("number out of range") }
        return .number(value)
    }
}

/// Values whose extent `JSONParser.parseKeepingRaw` may take without
/// passing over their bytes (`FlowMemo`'s flows).
protocol KnownValues {
    /// The length and nesting (`JSONParser.nesting`) of a known value that
    /// `bytes` begins with; nil when none.
    func prefix(of bytes: UnsafeRawBufferPointer) -> (length: Int, nesting: Int)?
}

/// An object read by `JSONParser.parseKeepingRaw`: its members, one of them
/// kept as bytes (`raw`, a range of the bytes parsed), and the objects of
/// its nested array (`items`), read the same way. An item that is not an
/// object has no members, its value in `other`.
struct JSONObjectRaw {
    var members = JSONMembers()
    var raw: Range<Int>?
    var items: [JSONObjectRaw]?
    var other: JSONValue?
}

/// An object's members in the order read, found by looking through them: a
/// resolve answer's objects have a few members, and a hash table of them
/// cost more than the looking (`JSONObjectRaw`).
struct JSONMembers: Equatable {
    private var pairs: [(key: String, value: JSONValue)] = []
    /// The keys, once there are many: an object of many members costs their number, not its square.
    /// Keys are their bytes, as everywhere (`ExactName`).
    private var keys: Set<ExactName>?

    subscript(key: String) -> JSONValue? { pairs.first { $0.key.sameBytes(as: key) }?.value }

    var isEmpty: Bool { pairs.isEmpty }
    var count: Int { pairs.count }

    /// Adds a member; false when the object has one of that name already.
    mutating func add(_ key: String, _ value: JSONValue) -> Bool {
        if keys == nil, pairs.count >= 16 { keys = Set(pairs.map { ExactName($0.key) }) }
        if keys != nil {
            guard keys?.insert(ExactName(key)).inserted == true else { return false }
        } else if pairs.contains(where: { $0.key.sameBytes(as: key) }) {
            return false
        }
        // A resolve answer's objects have a few members: room for four at once, not grown one by one.
        if pairs.capacity == 0 { pairs.reserveCapacity(4) }
        pairs.append((key, value))
        return true
    }

    mutating func remove(_ key: String) {
        pairs.removeAll { $0.key.sameBytes(as: key) }
        keys?.remove(ExactName(key))
    }

    /// The same members, whatever their order.
    static func == (a: JSONMembers, b: JSONMembers) -> Bool {
        a.count == b.count && a.pairs.allSatisfy { b[$0.key] == $0.value }
    }
}
