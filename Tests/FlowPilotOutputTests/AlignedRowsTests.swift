import FlowPilotCore
import Foundation
import Testing

@testable import FlowPilotOutput

/// A text listing of any length in flat memory prints what the in-memory
/// table prints, byte for byte; and the date a listing row shows is the one
/// Foundation's RFC 3339 formatter gives.
@Suite("aligned rows and RFC 3339")
struct AlignedRowsTests {
    static let columns = ["placement", "user_id", "size"]

    static func rows(_ count: Int) -> [[String]] {
        (0..<count).map { n in
            // Widths that grow late (the widest row is the last), a control character, a non-ASCII name.
            [
                "paywall" + String(repeating: "x", count: n % 7), n % 5 == 0 ? "caf\u{e9}\u{7}" : "user-\(n)",
                "\(n * 137)",
            ]
        }
    }

    @Test("spilled past its rows in memory or not, the table is Table.text()'s", arguments: [0, 1, 3, 4, 50])
    func sameAsTable(count: Int) throws {
        var aligned = AlignedRows(columns: Self.columns, inMemory: 3)
        for row in Self.rows(count) { try aligned.add(row) }
        var printed: [UInt8] = []
        try aligned.finish { printed += $0 }
        let expected = Table(columns: Self.columns, rows: Self.rows(count)).text()
        #expect(String(decoding: printed, as: UTF8.self) == expected)
    }

    @Test(
        "a row's date is Foundation's RFC 3339, whole seconds, from 1601 (gmtime is proleptic Gregorian; Foundation is Julian before 1582) to 9999"
    )
    func rfc3339() {
        let formatter = Date.ISO8601FormatStyle(timeZone: .gmt)
        for seconds in [
            -11_644_473_600.0, -1.5, 0, 1.999, 951_782_400, 1_795_873_355.406, 253_402_300_799,
        ] {
            let date = Date(timeIntervalSince1970: seconds)
            let whole = Date(timeIntervalSince1970: seconds.rounded(.down))
            #expect(RFC3339.string(date) == formatter.format(whole), "\(seconds)")
        }
    }
}
