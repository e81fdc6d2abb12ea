import FlowPilotOutput
import Testing

@Suite("tables as text and CSV")
struct TableTests {
    let table = Table(columns: ["placement", "errors"], rows: [["paywall", "a=1, b=2"], ["on\"boarding", "-"]])

    @Test("text pads each column to its widest cell, header in capitals")
    func text() {
        #expect(table.text() == "PLACEMENT    ERRORS\npaywall      a=1, b=2\non\"boarding  -\n")
    }

    @Test("CSV quotes a cell with a comma or a quote (RFC 4180) and nothing else")
    func csv() {
        #expect(table.csv() == "placement,errors\npaywall,\"a=1, b=2\"\n\"on\"\"boarding\",-\n")
    }
}
