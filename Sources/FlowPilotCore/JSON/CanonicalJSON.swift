import Foundation

/// Canonical JSON, the input of identity fingerprints and flow content hashes:
/// object keys sorted by their UTF-8 bytes at every level, no insignificant
/// whitespace, an integer (`JSONValue.integer`) as its digits, any other number
/// in shortest round-trip form (integral values within 2^53 without a fraction,
/// as JavaScript prints them), strings with only the escapes JSON requires.
public enum CanonicalJSON {
    public static func data(_ value: JSONValue) -> Data {
        var out = [UInt8]()
        out.reserveCapacity(1024)
        write(value, into: &out)
        return Data(out)
    }

    public static func string(_ value: JSONValue) -> String {
        String(decoding: data(value), as: UTF8.self)
    }

    /// The same canonical content, indented by two spaces and ending in a newline,
    /// for files people read (a bundle's manifest). Deterministic byte for byte.
    public static func prettyData(_ value: JSONValue) -> Data {
        var out = [UInt8]()
        writePretty(value, indent: 0, into: &out)
        out.append(0x0A)
        return Data(out)
    }

    /// Sorts keys by UTF-8 bytes (Swift's `<` on String compares Unicode
    /// canonical order, which differs for some non-ASCII keys).
    public static func sortedKeys<S: Sequence>(_ keys: S) -> [String] where S.Element == String {
        keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// A JSON object's keys (`JSONValue.object`'s) in canonical order.
    public static func sortedKeys<S: Sequence>(_ keys: S) -> [String] where S.Element == ExactName {
        keys.sorted().map(\.string)
    }

    /// An object written member by member by a caller that knows its keys and
    /// adds them in canonical order (a cache entry's metadata): no dictionary,
    /// no sort, one buffer.
    public struct SortedObject {
        private var out: [UInt8]
        private var last: StaticString?

        public init(capacity: Int) { self.init(capacity: capacity, after: "") }

        /// An object written after `prefix` (a row's separator), in the same buffer.
        public init(capacity: Int, after prefix: StaticString) {
            out = []
            out.reserveCapacity(capacity)
            prefix.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "{"))
        }

        /// A member whose value is already canonical JSON bytes. Keys are
        /// the caller's literals, plain ASCII that needs no escape.
        mutating func raw(_ key: StaticString, _ value: some Sequence<UInt8>) {
            self.key(key)
            out.append(contentsOf: value)
        }

        /// A member's key and colon, the comma before it when it is not the first.
        private mutating func key(_ key: StaticString) {
            key.withUTF8Buffer { key in
                assert(key.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }, "a plain key")
                if let last {
                    assert(last.withUTF8Buffer { $0.lexicographicallyPrecedes(key) }, "\(key) after \(last)")
                    out.append(UInt8(ascii: ","))
                }
                out.append(UInt8(ascii: "\""))
                out.append(contentsOf: key)
                out.append(UInt8(ascii: "\""))
                out.append(UInt8(ascii: ":"))
            }
            last = key
        }

        public mutating func string(_ key: StaticString, _ value: String) {
            self.key(key)
            writeString(value, into: &out)
        }

        /// A string, or null for nil.
        public mutating func string(_ key: StaticString, _ value: String?) {
            if let value { string(key, value) } else { raw(key, "null".utf8) }
        }

        public mutating func bool(_ key: StaticString, _ value: Bool) {
            raw(key, (value ? "true" : "false").utf8)
        }

        /// An array of strings.
        mutating func strings(_ key: StaticString, _ values: [String]) {
            raw(key, CollectionOfOne(UInt8(ascii: "[")))
            for (i, value) in values.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(value, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        }

        /// An integer as its digits, as `data` writes an `integer`.
        public mutating func integer(_ key: StaticString, _ value: Int) {
            self.key(key)
            DecimalText.append(Int64(value), to: &out)
        }

        mutating func finish() -> Data { Data(finishBytes()) }

        /// `finish`'s bytes as they were written, with no copy into a `Data`.
        public mutating func finishBytes() -> [UInt8] {
            out.append(UInt8(ascii: "}"))
            return out
        }
    }

    /// An object's members in canonical key order.
    static func sortedMembers(_ members: [ExactName: JSONValue]) -> [(key: ExactName, value: JSONValue)] {
        members.sorted { $0.key < $1.key }
    }

    private static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .bool(let b): out.append(contentsOf: Array((b ? "true" : "false").utf8))
        case .number(let n): out.append(contentsOf: Array(formatNumber(n).utf8))
        case .integer(let n): out.append(contentsOf: Array(String(n).utf8))
        case .string(let s): writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(item, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in sortedMembers(members).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key.string, into: &out)
                out.append(UInt8(ascii: ":"))
                write(value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func writePretty(_ value: JSONValue, indent: Int, into out: inout [UInt8]) {
        func pad(_ n: Int) { out.append(contentsOf: repeatElement(0x20, count: n)) }
        switch value {
        case .array(let items) where !items.isEmpty:
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                out.append(contentsOf: i == 0 ? [0x0A] : [UInt8(ascii: ","), 0x0A])
                pad(indent + 2)
                writePretty(item, indent: indent + 2, into: &out)
            }
            out.append(0x0A)
            pad(indent)
            out.append(UInt8(ascii: "]"))
        case .object(let members) where !members.isEmpty:
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in sortedMembers(members).enumerated() {
                out.append(contentsOf: i == 0 ? [0x0A] : [UInt8(ascii: ","), 0x0A])
                pad(indent + 2)
                writeString(key.string, into: &out)
                out.append(contentsOf: [UInt8(ascii: ":"), 0x20])
                writePretty(value, indent: indent + 2, into: &out)
            }
            out.append(0x0A)
            pad(indent)
            out.append(UInt8(ascii: "}"))
        default:
            write(value, into: &out)
        }
    }

    /// Shortest round-trip form: integral values within 2^53 print as integers,
    /// everything else as Swift's shortest representation with the exponent
    /// written without leading zeros (`1e-7`, `1e+21`).
    static func formatNumber(_ n: Double) -> String {
        if n == 0 { return "0" }
        if n.rounded() == n, abs(n) < 9_007_199_254_740_992 {
            return String(Int64(n))
        }
        var s = n.description
        if let e = s.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            let mantissa = s[..<e]
            var exponent = s[s.index(after: e)...]
            var sign = "+"
            if let first = exponent.first, first == "-" || first == "+" {
                sign = String(first)
                exponent = exponent.dropFirst()
            }
            let digits = exponent.drop(while: { $0 == "0" })
            s = mantissa + "e" + sign + (digits.isEmpty ? "0" : digits)
        }
        return s
    }

    fileprivate static func writeString(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { writeString(utf8: UnsafeRawBufferPointer($0), into: &out) }
    }

    /// A JSON string of text given as its UTF-8 bytes (checked by the
    /// caller), appended to `out`: what `data` writes for the string.
    public static func appendString(utf8 bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        writeString(utf8: bytes, into: &out)
    }

    /// `writeString` of text given as its UTF-8 bytes (checked by the caller).
    fileprivate static func writeString(utf8 bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Runs of bytes that need no escape (most strings are one run) go at once.
        var run = 0
        for i in bytes.indices {
            let byte = bytes[i]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[run..<i]))
            run = i + 1
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            default:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [
                    0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                ])
            }
        }
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[run...]))
        out.append(UInt8(ascii: "\""))
    }
}
