import FlowPilotCore
import FlowPilotOutput
import Testing

@Suite("JSON output for machines")
struct JSONOutputTests {
    struct Report: Encodable {
        let schemaVersion = 1
        let flowID = "f"
        let attributes: [String: JSONValue] = ["planType": .string("Pro"), "URL": .bool(true)]
    }

    @Test("field names become snake_case; keys of data (attributes, URLs) are kept as they are")
    func snakeCaseFieldsOnly() throws {
        let text = try JSONOutput.string(Report())
        #expect(text.contains(#""schema_version" : 1"#) && text.contains(#""flow_id" : "f""#))
        #expect(text.contains(#""planType" : "Pro""#) && text.contains(#""URL" : true"#))
    }
}
