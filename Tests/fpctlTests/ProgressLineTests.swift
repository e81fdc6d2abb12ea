import Foundation
import Testing

/// warm's progress line on a terminal (a pty, through util-linux's `script`):
/// a rate a person can trust, and gone before the summary is printed.
@Suite("warm's progress line in a pty")
struct ProgressLineTests {
    @Test(
        "the rate is never taken over less than a second, the share done and the time left are shown, and the summary starts at the margin"
    )
    func progressInPTY() throws {
        // 30 identities, one at a time, 60 ms each: about 2 s, at most ~17/s.
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "60"])
        let tmp = try TemporaryDirectory()
        let ids = (0..<30).map { #"{"user_id":"u-\#($0)"}"# }.joined(separator: "\n") + "\n"
        try ids.write(toFile: tmp.file("ids.jsonl"), atomically: true, encoding: .utf8)
        let command = [
            Paths.fpctl, "warm", "paywall", "--api-url", server.url, "--app-id", "demo",
            "--identities", tmp.file("ids.jsonl"), "--cache-dir", tmp.file("cache"), "--media", "none",
            "--concurrency", "1", "--summary",
        ].map { "'\($0)'" }.joined(separator: " ")
        let r = try run(try tool("script"), ["-qefc", command, "/dev/null"], timeout: 60)
        #expect(r.status == 0, "\(r.stdout)")
        let screen = r.stdout
        // Every rate shown is one a person can believe (the backend allows ~17/s).
        let rates = screen.split(separator: "\r").compactMap { line -> Int? in
            guard let slash = line.range(of: "/s") else { return nil }
            return Int(line[..<slash.lowerBound].split(separator: " ").last ?? "")
        }
        #expect(!rates.isEmpty, "no progress line: \(screen.debugDescription)")
        #expect(rates.allSatisfy { $0 <= 25 }, "\(rates)")
        // The identities come from a file: each line starts with the share done,
        // never going back, and once there is a rate it says the time left.
        let lines = screen.split(separator: "\r").filter { $0.contains(" identities, ") }
        let shares = lines.compactMap { line -> Int? in
            let text = line.replacingOccurrences(of: "\u{1B}[2K", with: "")
            guard let percent = text.firstIndex(of: "%") else { return nil }
            return Int(text[..<percent])
        }
        #expect(shares.count == lines.count, "a progress line without its percentage: \(lines)")
        #expect(shares == shares.sorted() && shares.allSatisfy { (0...100).contains($0) }, "\(shares)")
        #expect(lines.contains { $0.contains("/s, ") && $0.contains("s left") }, "no time left shown: \(lines)")
        // The summary table starts on a line of its own, after the line was cleared.
        let header = try #require(screen.range(of: "PLACEMENT"))
        let before = screen[..<header.lowerBound]
        #expect(
            before.isEmpty || before.hasSuffix("\u{1B}[2K") || before.hasSuffix("\n"),
            "\(before.suffix(80).debugDescription)")
    }

    @Test("SIGINT on a terminal: the progress line is cleared before the stopping note, and warm exits 75")
    func interruptedInPTY() throws {
        signal(SIGINT, SIG_DFL)  // as a terminal's children get it, even if this runner ignores it
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "100"])
        let tmp = try TemporaryDirectory()
        let ids = try tmp.identities(200)
        let command = [
            Paths.fpctl, "warm", "paywall", "--api-url", server.url, "--app-id", "demo", "--identities", ids,
            "--cache-dir", tmp.file("cache"), "--media", "none", "--concurrency", "2", "--summary",
        ].map { "'\($0)'" }.joined(separator: " ")
        let output = tmp.file("screen")
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let script = Process()
        script.executableURL = URL(fileURLWithPath: try tool("script"))
        script.arguments = ["-qefc", command, "/dev/null"]
        script.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        script.standardInput = FileHandle.nullDevice
        try script.run()
        // Once the progress line is up (it needs a second for its rate), the interrupt goes to fpctl.
        let deadline = Date().addingTimeInterval(30)
        while script.isRunning, Date() < deadline,
            !((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("/s")
        {
            usleep(20_000)
        }
        let found = try run(try tool("pgrep"), ["-f", "^\(Paths.fpctl) warm .*\(tmp.file("cache"))"])
        let pid = try #require(Int32(found.stdout.split(separator: "\n").first ?? ""), "no fpctl: \(found.stdout)")
        kill(pid, SIGINT)
        script.waitUntilExit()
        #expect(script.terminationStatus == 75)
        let screen = try String(contentsOfFile: output, encoding: .utf8)
        #expect(screen.contains("\r\u{1B}[2Kfpctl: SIGINT: stopping"), "\(screen.suffix(300).debugDescription)")
        #expect(screen.contains("stopped by a signal"), "\(screen.suffix(300).debugDescription)")
    }
}
