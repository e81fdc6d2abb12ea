import Foundation
import FuzzSupport

@testable import FlowPilotCore

// JSON parser: never crashes, and the canonical form of any accepted document
// parses back to the same value and is its own canonical form. The member list
// (what a resolve body is read with) accepts exactly the objects `parse` does,
// with the same members. Parsing with positions accepts the same texts and
// gives the same value, and the pointer of every value (the first 256) leads
// to a byte where that value starts. A resolve answer read with known flows
// (`KnownValues`, FlowMemo's) is read as it is without them. An integer is
// the digits it was read from, and canonical JSON writes those digits (#64).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Fuzz.bytes(start, count)
    let parsed = try? JSONValue.parse(data)
    let members = try? data.withUnsafeBytes { try JSONValue.parseMembers(bytes: $0) }
    Fuzz.check(
        (members != nil) == (parsed?.objectValue != nil), "parseMembers and parse disagree on whether this is an object"
    )
    if let members, let object = parsed?.objectValue {
        Fuzz.check(members.count == object.count, "parseMembers lost or added a member")
        Fuzz.check(members.allSatisfy { object[ExactName($0.key)] == $0.value }, "parseMembers changed a member")
    }
    let positioned = try? JSONValue.parse(data, positions: true)
    Fuzz.check((positioned != nil) == (parsed != nil), "parsing with positions accepts other texts")
    if let (value, positions) = positioned, let positions {
        Fuzz.check(value == parsed, "parsing with positions gives another value")
        var lookup = JSONPositions.Lookup(positions)
        for (pointer, v) in pointers(value).prefix(256) {
            let offset = lookup.offset(of: Substring(pointer))
            Fuzz.check(offset < data.count, "\(pointer) points past the text")
            let first = data[data.startIndex + offset]
            let expected: Set<UInt8> =
                switch v {
                case .object: [UInt8(ascii: "{")]
                case .array: [UInt8(ascii: "[")]
                case .string: [UInt8(ascii: "\"")]
                case .bool: [UInt8(ascii: "t"), UInt8(ascii: "f")]
                case .null: [UInt8(ascii: "n")]
                case .number, .integer: Set(Array("-0123456789".utf8))
                }
            Fuzz.check(expected.contains(first), "\(pointer) points at byte \(offset), not at its value")
            if case .integer(let n) = v {
                // An integer keeps its digits: the text it was read from, and what canonical JSON writes.
                let digits = Array(String(n).utf8)
                let text = data.dropFirst(offset).prefix(digits.count + 1)
                Fuzz.check(
                    Array(text.prefix(digits.count)) == digits
                        && (text.count == digits.count || !"0123456789.eE".utf8.contains(text.last ?? 0)),
                    "\(pointer): the integer \(n) is not the text it was read from")
                Fuzz.check(CanonicalJSON.string(v) == String(n), "\(pointer): \(n) is not written as its digits")
            }
            let p = lookup.position(of: Substring(pointer))
            Fuzz.check(p.line >= 1 && p.column >= 1, "\(pointer): line and column start at 1")
        }
    }
    checkKnownValues(data)
    guard let value = parsed else { return 0 }
    let canonical = CanonicalJSON.data(value)
    guard let again = try? JSONValue.parse(canonical) else {
        Fuzz.fail("canonical form does not parse: \(String(decoding: canonical, as: UTF8.self))")
    }
    Fuzz.check(again == value, "round trip changed the value: \(String(decoding: canonical, as: UTF8.self))")
    Fuzz.check(CanonicalJSON.data(again) == canonical, "canonical form is not stable")
    return 0
}

/// Every value's JSON pointer (RFC 6901), in document order of the tree.
func pointers(_ value: JSONValue, _ at: String = "") -> [(String, JSONValue)] {
    var out = [(at, value)]
    switch value {
    case .array(let items):
        for (i, item) in items.enumerated() { out += pointers(item, "\(at)/\(i)") }
    case .object(let members):
        for (key, member) in members {
            let token = key.string.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
            out += pointers(member, "\(at)/\(token)")
        }
    default: break
    }
    return out
}

/// Known values that an answer holds (each `flow` found without them) or
/// that the input begins with: an answer read with them is accepted or
/// refused as without them, with the same ranges and members.
func checkKnownValues(_ input: Data) {
    let data = Array(input)
    struct Known: KnownValues {
        let values: [(bytes: [UInt8], nesting: Int)]
        func prefix(of bytes: UnsafeRawBufferPointer) -> (length: Int, nesting: Int)? {
            values.first { bytes.starts(with: $0.bytes) }.map { ($0.bytes.count, $0.nesting) }
        }
    }
    func read(_ known: Known?) -> JSONObjectRaw? {
        try? data.withUnsafeBytes {
            try JSONParser.parseKeepingRaw(bytes: $0, member: "flow", nested: "results", known: known)
        }
    }
    let plain = read(nil)
    var candidates = ((plain?.items ?? []) + (plain.map { [$0] } ?? [])).compactMap { $0.raw.map { Array(data[$0]) } }
    for cut in [data.count / 2, data.count / 3] where cut > 0 { candidates.append(Array(data.prefix(cut))) }
    let values = candidates.compactMap { bytes in
        bytes.withUnsafeBytes { JSONParser.nesting(of: $0) }.map { (bytes, $0) }
    }
    guard !values.isEmpty else { return }
    let known = read(Known(values: values))
    Fuzz.check((known != nil) == (plain != nil), "known values change whether an answer is accepted")
    Fuzz.check(known?.raw == plain?.raw && known?.members == plain?.members, "known values change an answer")
    Fuzz.check(known?.items?.map { $0.raw } == plain?.items?.map { $0.raw }, "known values change a result's flow")
}
