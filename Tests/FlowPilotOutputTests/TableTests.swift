import FlowPilotOutput
import Foundation
import Testing

@testable import FlowPilotCore

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

/// Warm's CSV rows are written cell by cell as bytes (`CSVRow`): each must
/// read back as the same cells `Table.csvLine` quotes, whatever a user id
/// or an error message holds.
@Suite("warm's CSV rows")
struct WarmCSVRowTests {
    final class Sink: OutputSink {
        var bytes: [UInt8] = []
        func write(_ data: Data) { bytes += data }
        func flush() {}
    }

    @Test("a number's cell is its decimal digits, a sign before a negative one, whatever its size")
    func numberCells() {
        let numbers = [0, 7, 10, 1_234_567_890, -42, Int.max, Int.min]
        var row = CSVRow()
        for number in numbers { row.cell(number) }
        #expect(String(decoding: row.end(), as: UTF8.self) == numbers.map(String.init).joined(separator: ",") + "\n")
    }

    @Test("a row written as bytes is csvLine of the text row's cells, for ids with commas, quotes, newlines and none")
    func rowsMatchCSVLine() {
        let users = ["u1", "has,comma", "quo\"te", "line\nbreak", "", "tab\there", "ünïcode"]
        let failure = ResolveFailure.backend(code: "rate_limited", message: "slow down, \"please\"")
        for user in users {
            let identity = Identity(userID: user)
            for decision in [TierChain.Decision.noFlow, .fail(failure)] {
                let outcome = PrefetchOutcome(identity, "pay,wall", decision, mediaWarmed: false, since: .now)
                let sink = Sink()
                let report = OutcomeReport(format: .csv, rows: true, to: sink)
                let header = sink.bytes.count
                report.add(outcome)
                let row = String(decoding: sink.bytes[header...], as: UTF8.self)
                let shown = user.isEmpty ? "(anonymous)" : user
                let expected = Table.csvLine([
                    "\(shown) \(identity.fingerprint.prefix(8))", "pay,wall", outcome.state.rawValue, "", "", "false",
                    "", "", "", String(outcome.milliseconds), outcome.failure?.description ?? "",
                ])
                #expect(row == expected, "user id \(user.debugDescription)")
            }
        }
    }
}
