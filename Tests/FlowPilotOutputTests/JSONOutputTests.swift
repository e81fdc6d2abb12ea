import FlowPilotCore
import FlowPilotOutput
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
