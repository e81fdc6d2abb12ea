import Foundation
import Testing

@testable import FlowPilotCore
@testable import FlowPilotOutput

/// What `cache prune` prints of many removals, written from lists that
/// spill to a scratch file, is byte for byte what the one JSON layout and
/// the in-memory table print of the same rows.
@Suite("prune's report from spilled lists")
struct PruneReportTests {
    static func removal(_ n: Int) -> Removal {
        Removal(
            kind: n % 3 == 0 ? .flow : .superseded, path: "log/\(n / 1000).seg#\(n * 64)", bytes: Int64(n * 7),
            reason: n % 5 == 0 ? "identity caf\u{e9}\u{7}" : "resolved \(n)s ago")
    }

    @Test(
        "past the rows held in memory, JSON, CSV and text are those of the whole document", arguments: [0, 2, 20_000])
    func sameAsWhole(count: Int) throws {
        let result = RemovalResult()
        for n in 0..<count { try result.remove(Self.removal(n)) }
        if count > 0 { try result.fail(Self.removal(1), "log/0.seg: a writer is still appending to it") }
        func printed(_ format: OutputFormat) throws -> String {
            var out: [UInt8] = []
            try PruneReport(result, dryRun: false).write(as: format) { out += $0 }
            return String(decoding: out, as: UTF8.self)
        }
        let removals = (0..<count).map(Self.removal)
        let whole = JSONDocument.data([
            "bytes": .integer(Int64(removals.reduce(0) { $0 + $1.bytes })), "dry_run": .bool(false),
            "files": .integer(Int64(count)),
            "failed": .array(
                count > 0
                    ? [
                        .object([
                            "path": .string(Self.removal(1).path),
                            "reason": .string("log/0.seg: a writer is still appending to it"),
                        ])
                    ]
                    : []),
            "removed": .array(
                removals.map {
                    .object([
                        "bytes": .integer($0.bytes), "kind": .string($0.kind.rawValue), "path": .string($0.path),
                        "reason": .string($0.reason),
                    ])
                }),
        ])
        #expect(try printed(.json) == String(decoding: whole, as: UTF8.self))
        let table = Table(columns: ["kind", "path", "bytes", "reason"], rows: removals.map(\.cells))
        #expect(try printed(.text) == table.text())
        #expect(try printed(.csv) == table.csv())
        var warnings: [String] = []
        try PruneReport(result, dryRun: false).warnings { warnings.append($0) }
        #expect(warnings.count == (count > 0 ? 1 : 0))
    }

    @Test("a spilled list reads back in order, every time, cells longer than its read buffer included")
    func spilledList() throws {
        let list = SpilledList<[String]>(inMemory: 3)
        let rows = (0..<40).map { n in [String(repeating: "\u{e9}", count: n * 20_000), "row \(n)", ""] }
        for row in rows { try list.append(row) }
        #expect(list.count == 40)
        #expect(try list.array() == rows)
        #expect(try list.array() == rows, "read twice")
    }
}
