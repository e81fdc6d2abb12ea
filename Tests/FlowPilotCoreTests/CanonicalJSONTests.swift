import Foundation
import Testing

@testable import FlowPilotCore

@Suite("canonical JSON, the input of fingerprints and content hashes")
struct CanonicalJSONTests {
    @Test("keys are sorted by UTF-8 bytes at every level, without whitespace")
    func sortedKeys() throws {
        let value = try JSONValue.parse(Data(#"{"b": 1, "a": {"z": true, "é": null, "Z": "x"}, "A": [3, 2]}"#.utf8))
        #expect(CanonicalJSON.string(value) == #"{"A":[3,2],"a":{"Z":"x","z":true,"é":null},"b":1}"#)
    }

    @Test(
        "numbers take their shortest round-trip form",
        arguments: [
            ("1", "1"), ("1.0", "1"), ("-0.0", "0"), ("0.1", "0.1"), ("1e-7", "1e-7"), ("1e21", "1e+21"),
            ("123456789012", "123456789012"), ("2.5", "2.5"),
        ])
    func numbers(input: String, expected: String) throws {
        #expect(CanonicalJSON.string(try JSONValue.parse(Data("[\(input)]".utf8))) == "[\(expected)]")
    }

    @Test("strings keep non-ASCII as UTF-8 and escape only what JSON requires")
    func strings() throws {
        let value = JSONValue.string("a\"b\\c\n\u{1}ü/")
        #expect(CanonicalJSON.string(value) == #""a\"b\\c\n\u0001ü/""#)
    }

    @Test("booleans stay booleans, not numbers")
    func booleans() throws {
        #expect(CanonicalJSON.string(try JSONValue.parse(Data("[true,false,1,0]".utf8))) == "[true,false,1,0]")
    }

    @Test("the pretty form holds the same content as the compact one")
    func prettyRoundTrip() throws {
        let value = try JSONValue.parse(Data(#"{"b":[1,{"c":"d"}],"a":{},"e":[]}"#.utf8))
        #expect(try JSONValue.parse(CanonicalJSON.prettyData(value)) == value)
        #expect(String(decoding: CanonicalJSON.prettyData(value), as: UTF8.self).hasPrefix("{\n  \"a\": {},\n"))
    }

    @Test("invalid JSON is an error, not a crash")
    func invalid() {
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Data("{\"a\":".utf8)) }
    }
}

@Suite("the JSON parser is strict RFC 8259")
struct JSONParserTests {
    @Test(
        "malformed documents are refused with the byte offset",
        arguments: [
            "", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", "-", "tru", "\"\\x\"", "\"\u{1}\"",
            "{\"a\":1,\"a\":2}", "[1] [2]", "\"\\ud800\"", "NaN", "1e999",
        ])
    func refused(text: String) {
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Data(text.utf8)) }
    }

    @Test("escapes, surrogate pairs and nesting parse to the values they spell")
    func accepted() throws {
        let value = try JSONValue.parse(Data(#" {"s":"a\u00e9\ud83d\ude00\n\/","n":[-0.5e2,0,true,null]} "#.utf8))
        #expect(value["s"] == .string("aé😀\n/"))
        #expect(value["n"] == .array([.number(-50), .number(0), .bool(true), .null]))
    }

    @Test("strings are UTF-8: non-ASCII is kept as written, invalid UTF-8 is refused, escaped or not")
    func utf8Strings() throws {
        let value = try JSONValue.parse(Data(#"{"ascii":"plain","é":"café 😀","mixed":"a\nü"}"#.utf8))
        #expect(value["ascii"] == .string("plain"))
        #expect(value["é"] == .string("café 😀"))
        #expect(value["mixed"] == .string("a\nü"))
        let quote = UInt8(ascii: "\"")
        for bad: [UInt8] in [[0xFF], [0xC3], [0x61, 0xC3, 0x28], [0xED, 0xA0, 0x80], [0x5C, 0x6E, 0xFF]] {
            #expect(throws: JSONValue.ParseError.self, "\(bad)") { try JSONValue.parse(Data([quote] + bad + [quote])) }
        }
    }

    @Test("an object's members in document order, as strict as a whole parse")
    func members() throws {
        func members(_ text: String) throws -> [(key: String, value: JSONValue)] {
            try Data(text.utf8).withUnsafeBytes { try JSONValue.parseMembers(bytes: $0) }
        }
        let list = try members(#" {"z":1,"a":{"b":[true]},"m":null} "#)
        #expect(list.map(\.key) == ["z", "a", "m"])
        #expect(list[1].value == .object(["b": .array([.bool(true)])]))
        #expect(try members("{}").isEmpty)
        // Duplicates are refused among few keys and among many (past 16, a set finds them).
        let many = (0..<40).map { "\"k\($0)\":\($0)" }
        #expect(try members("{" + many.joined(separator: ",") + "}").count == 40)
        for text in [
            #"{"a":1,"a":2}"#, "{" + (many + [#""k3":0"#]).joined(separator: ",") + "}",
            "{" + (many + [#""k39":0"#]).joined(separator: ",") + "}", "[1]", "\"s\"", "{} {}", "{\"a\":}", "",
            #"{"a":{"b":1,"b":2}}"#,
        ] {
            #expect(throws: JSONValue.ParseError.self, "\(text.prefix(40))") { try members(text) }
        }
    }

    @Test("nesting deeper than 512 levels is refused, not a stack overflow")
    func deepNesting() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Data(deep.utf8)) }
    }
}
