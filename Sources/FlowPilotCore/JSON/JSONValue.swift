import Foundation

/// A parsed JSON document that keeps what canonical hashing needs: object keys,
/// the difference between numbers and booleans, `null`, and integers exactly.
///
/// A number written as digits alone (`-?[1-9][0-9]*` or `0`, no fraction, no
/// exponent) that fits 64 bits is an `integer`, kept exactly and written back as
/// its digits (a 64-bit id or a price in micros survives a parse and a write);
/// any other number is a `number`, a double. `-0`, `5.0` and `5e0` are numbers:
/// fields that must be integers (a signature's sequence) take only `integer`,
/// so their bytes have one spelling.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case integer(Int64)
    case string(String)
    case array([JSONValue])
    /// Members by their keys' bytes (`ExactName`): "café" precomposed and
    /// decomposed are two keys, as JSON and a parser that compares code
    /// units read them (a `String` key would merge them: Unicode equivalence).
    case object([ExactName: JSONValue])

    /// Parses UTF-8 JSON bytes (RFC 8259, duplicate keys refused). Throws
    /// `JSONValue.ParseError` naming what is wrong and the byte offset.
    public static func parse(_ data: Data) throws -> JSONValue {
        try JSONParser.parse(data)
    }

    /// `parse(_:)` over bytes the caller holds (a network buffer, say), without copying them.
    public static func parse(bytes: UnsafeRawBufferPointer) throws -> JSONValue {
        try JSONParser.parse(bytes: bytes)
    }

    /// The members of a JSON object in document order, for a reader of a few
    /// known keys; as strict as `parse` (duplicate keys refused), and anything
    /// but an object is a `ParseError`.
    public static func parseMembers(bytes: UnsafeRawBufferPointer) throws -> [(key: String, value: JSONValue)] {
        try JSONParser.parseMembers(bytes: bytes)
    }

    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public let message: String
        /// The byte where the text stops being JSON.
        public var offset: Int? = nil
        public var description: String { message }
    }

    // MARK: Access

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[ExactName(key)] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var objectValue: [ExactName: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// Either kind of number as a double (an integer beyond 2^53 rounds).
    public var numberValue: Double? {
        switch self {
        case .number(let n): n
        case .integer(let n): Double(n)
        default: nil
        }
    }

    /// An integer written as digits alone; nil for any other spelling of a
    /// whole number (`5.0`, `5e0`), which a signed field refuses.
    public var integerValue: Int64? {
        if case .integer(let n) = self { return n }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The JSON type name used in error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number, .integer: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSONValue: Equatable {
    /// The same JSON value: numbers equal when their canonical forms are (an
    /// integer and a double of exactly its value), never through a rounding.
    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.integer(let x), .integer(let y)): x == y
        case (.integer(let x), .number(let y)), (.number(let y), .integer(let x)): exactly(y) == x
        case (.string(let x), .string(let y)): x.sameBytes(as: y)
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x == y
        default: false
        }
    }

    /// The integer a double is exactly, if it is one within 64 bits.
    static func exactly(_ d: Double) -> Int64? {
        guard d.rounded() == d, d >= -9_223_372_036_854_775_808, d < 9_223_372_036_854_775_808 else { return nil }
        return Int64(d)
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? container.decode(Int64.self) {
            self = .integer(n)
        } else if let n = try? container.decode(Double.self) {
            self = .number(n)
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else if let a = try? container.decode([JSONValue].self) {
            self = .array(a)
        } else {
            // A dictionary, whose keys are data (a decoder's key strategy leaves them); `String`-keyed, as
            // Codable's dictionaries are. fpctl's own parser (`parse`) keeps keys that differ only in their bytes.
            self = .object(try container.decode(Dictionary<String, JSONValue>.self).exactKeys)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .number(let n): try container.encode(n)
        case .integer(let n): try container.encode(n)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o):
            // As a dictionary, as it is decoded: two keys equal under Unicode equivalence are one here (the
            // first in byte order); `CanonicalJSON` and `JSONDocument`, which fpctl writes with, keep both.
            try container.encode(
                Dictionary(
                    o.sorted { $0.key < $1.key }.map { ($0.key.string, $0.value) }, uniquingKeysWith: { a, _ in a }))
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
}
