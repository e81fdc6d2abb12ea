import FlowPilotCore
import FlowPilotOutput
import Foundation
import Testing

@Suite("JSON output for machines")
struct JSONOutputTests {
    struct Report: Encodable {
        let flowID = "f"
        let attributes: [String: JSONValue] = ["planType": .string("Pro"), "URL": .bool(true)]
    }

    @Test("field names become snake_case; keys of data (attributes, URLs) are kept as they are")
    func snakeCaseFieldsOnly() throws {
        let text = try JSONOutput.string(Report())
        #expect(text == #"{"attributes":{"URL":true,"planType":"Pro"},"flow_id":"f","schema_version":1}"# + "\n")
    }

    struct Listing: Encodable {
        let rows: [[String: Int]]
        let total: Int
    }

    @Test(
        "one layout: sorted keys, compact, schema_version added once, each row of an array of objects on its own line")
    func oneLayout() throws {
        let text = try JSONOutput.string(Listing(rows: [["b": 2, "a": 1], ["a": 3]], total: 2))
        #expect(text == "{\"rows\":[\n{\"a\":1,\"b\":2},\n{\"a\":3}\n],\"schema_version\":1,\"total\":2}\n")
        // The streamed form gives the same bytes.
        var stream = JSONDocument.Stream()
        var streamed = stream.start
        streamed += stream.row(.object(["a": .number(1), "b": .number(2)]))
        streamed += stream.row(.object(["a": .number(3)]))
        streamed += stream.end(["total": .number(2)])
        #expect(String(decoding: streamed, as: UTF8.self) == text)
        // Table and text name one format.
        #expect(OutputFormat(name: "table") == .text && OutputFormat(name: "text") == .text)
        #expect(OutputFormat(name: "yaml") == nil)
    }
}

/// `JSONValueEncoder` (#63: one writer, no JSON text between a report and its
/// layout) gives what Foundation's encoder with the options `JSONOutput` used
/// gave, parsed: the same keys, dates, numbers, and dictionary keys kept.
@Suite("JSONValueEncoder gives JSONEncoder's document, with no text in between")
struct JSONValueEncoderTests {
    struct Inner: Encodable {
        let flowID: String
        let p50Ms: Int?
        let ratio: Double
    }

    struct Sample: Encodable {
        let appID: String
        let urlString: String
        let imageTTLSeconds: Int
        let oldestResolvedAt: Date
        let missing: String?
        let big: Int64
        let whole: Double
        let tiny: Double
        let inner: Inner
        let rows: [Inner]
        let byPlacement: [String: Int]
        let raw: JSONValue
        let flag: Bool
        let small: UInt8
        let single: Float
        let counts: [Int32]
    }

    @Test("a document of every kind of member encodes as Foundation's snake-case encoder and a parse gave it")
    func sameAsFoundation() throws {
        let sample = Sample(
            appID: "demo", urlString: "u", imageTTLSeconds: 7,
            oldestResolvedAt: Date(timeIntervalSince1970: 1_780_272_000),
            missing: nil, big: 9_007_199_254_740_993, whole: 5, tiny: 1e-7,
            inner: Inner(flowID: "f", p50Ms: 12, ratio: 0.5),
            rows: [Inner(flowID: "a", p50Ms: nil, ratio: 1.25), Inner(flowID: "b", p50Ms: 3, ratio: 2)],
            byPlacement: ["payWall": 2, "onboarding": 1], raw: .object(["keepMe": .integer(1)]), flag: true,
            small: 7, single: 0.5, counts: [1, -2])
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.dateEncodingStrategy = .custom { date, enc in
            var c = enc.singleValueContainer()
            try c.encode(RFC3339.string(date))
        }
        let foundation = try JSONValue.parse(try encoder.encode(sample))
        let ours = try JSONValueEncoder.encode(sample)
        #expect(ours == foundation, "\(CanonicalJSON.string(ours))\n\(CanonicalJSON.string(foundation))")
        #expect(CanonicalJSON.data(ours) == CanonicalJSON.data(foundation))
        #expect(ours["by_placement"]?["payWall"] == .integer(2), "a dictionary's keys are kept")
        #expect(ours["big"] == .integer(9_007_199_254_740_993))
        #expect(ours["missing"] == nil, "nil is left out")
    }

    @Test(
        "snake case as Foundation writes it",
        arguments: [
            ("appID", "app_id"), ("imageTTLSeconds", "image_ttl_seconds"), ("p50Ms", "p50_ms"),
            ("flowBytes", "flow_bytes"),
            ("already_snake", "already_snake"), ("x", "x"), ("imageTTL", "image_ttl"),
        ])
    func snake(key: String, expected: String) {
        #expect(JSONValueEncoder.snakeCase(key) == expected)
    }

    @Test("a non-finite double is refused, as JSON cannot say it")
    func nonFinite() {
        #expect(throws: EncodingError.self) { try JSONValueEncoder.encode(["x": Double.infinity]) }
    }

    @Test("a foreign document (SARIF, GitLab): the same layout, no schema_version, a top-level array a finding a line")
    func foreignLayout() {
        func text(_ value: JSONValue) -> String { String(decoding: JSONDocument.foreign(value), as: UTF8.self) }
        #expect(
            text(.object(["version": "2.1.0", "runs": .array([.object(["b": 1, "a": .array([.object(["x": 1])])])])]))
                == "{\"runs\":[\n{\"a\":[{\"x\":1}],\"b\":1}\n],\"version\":\"2.1.0\"}\n")
        #expect(
            text(.array([.object(["b": 2, "a": 1]), .object(["a": 3])])) == "[\n{\"a\":1,\"b\":2},\n{\"a\":3}\n]\n")
        #expect(text(.array([])) == "[]\n")
        #expect(text(.array([1, "x"])) == "[1,\"x\"]\n", "an array of other values stays on its line")
        // The printed documents are this layout with schema_version added.
        #expect(JSONDocument.data(["a": 1]) == JSONDocument.foreign(.object(["a": 1, "schema_version": 1])))
    }
}
