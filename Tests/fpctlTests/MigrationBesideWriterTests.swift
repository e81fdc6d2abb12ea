import Foundation
import Testing

/// A migration beside a writer that opened the cache as format 1 (an older
/// fpctl, or `FPCTL_CACHE_FORMAT=1`), the usual upgrade of a fleet (#62):
/// what that writer reports written after the switch lands in `flows/`, and
/// the next command that cleans `flows/` up carries it into the log instead
/// of deleting it. The interleaving is forced: the writer is stopped
/// (`FPCTL_PAUSE=format-1-decided`) after it decided to write format 1 and
/// before it takes the lock, the migration runs whole, then the writer goes on.
@Suite("cache migrate beside a format-1 writer")
struct MigrationBesideWriterTests {
    func putInput(_ tmp: TemporaryDirectory, _ name: String, users: [String]) throws -> String {
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let lines = users.map {
            #"{"placement":"paywall","user_id":"\#($0)","ttl_seconds":300,"flow_file":"\#(flow)"}"#
        }
        let path = tmp.file(name)
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The state letter of a process (`/proc/PID/stat`'s third field): `T` when stopped.
    func state(_ pid: Int32) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[close...].dropFirst(2).first
    }

    @Test("what a format-1 writer wrote after the switch is carried into the log by the next prune, never lost")
    func lateFormatOneWriter() throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("cache")
        let formatOne = ["FPCTL_CACHE_FORMAT": "1"]
        let first = try fpctl(
            [
                "cache", "put", "--cache-dir", dir, "--input",
                try putInput(tmp, "a.jsonl", users: (0..<10).map { "a-\($0)" }),
            ],
            environment: formatOne)
        #expect(first.status == 0, "\(first.stderr)")

        // The writer: stopped once it decided to write its entries as format 1.
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: Paths.fpctl)
        writer.arguments = [
            "cache", "put", "--cache-dir", dir, "--input",
            try putInput(tmp, "b.jsonl", users: (0..<5).map { "b-\($0)" }),
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["FPCTL_CACHE_FORMAT"] = "1"
        environment["FPCTL_PAUSE"] = "format-1-decided"
        writer.environment = environment
        let output = Pipe()
        writer.standardOutput = output
        writer.standardError = output
        try writer.run()
        defer { if writer.isRunning { kill(writer.processIdentifier, SIGKILL) } }
        let deadline = Date() + 60
        while state(writer.processIdentifier) != "T" && writer.isRunning && Date() < deadline { usleep(10_000) }
        #expect(state(writer.processIdentifier) == "T", "the writer stopped at its decision")

        let migrate = try fpctl("cache", "migrate", "--cache-dir", dir)
        #expect(migrate.status == 0, "\(migrate.stderr)")
        kill(writer.processIdentifier, SIGCONT)
        writer.waitUntilExit()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(writer.terminationStatus == 0, "\(said)")
        #expect(said.contains("wrote 5"), "the writer reported its entries written: \(said)")

        // The next command that cleans up flows/ carries them into the log.
        let prune = try fpctl("cache", "prune", "--cache-dir", dir)
        #expect(prune.status == 0, "\(prune.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/flows"))
        let list = try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv")
        let rows = list.stdout.split(separator: "\n").dropFirst()
        let users: Set<String> = Set(rows.map { String($0.split(separator: ",")[1]) })
        let expected: Set<String> = Set((0..<10).map { "a-\($0)" } + (0..<5).map { "b-\($0)" })
        #expect(users == expected, "\(list.stdout)")
        #expect(try fpctl("cache", "verify", "--cache-dir", dir).status == 0)
    }
}
