import Foundation
import Testing

/// A FIFO given as a streamed input waits for its writer, as `cat` does: a
/// writer that comes later is read whole, never taken for an empty input.
@Suite("inputs from a FIFO whose writer comes later")
struct FIFOInputTests {
    @Test("cache put --input FIFO waits for the writer and stores what it writes")
    func putWaitsForWriter() throws {
        let tmp = try TemporaryDirectory()
        let fifo = tmp.file("lines")
        #expect(mkfifo(fifo, 0o644) == 0)
        let put = Process()
        put.executableURL = URL(fileURLWithPath: Paths.fpctl)
        put.arguments = ["cache", "put", "--cache-dir", tmp.file("cache"), "--input", fifo]
        let errors = Pipe()
        put.standardError = errors
        put.standardOutput = FileHandle.nullDevice
        try put.run()
        // The writer comes once fpctl holds the FIFO open: opening it without
        // waiting fails with ENXIO until a reader does, which the poll waits for.
        var fd: Int32 = -1
        let deadline = Date().addingTimeInterval(20)
        while fd < 0 && put.isRunning && Date() < deadline {
            fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if fd < 0 { usleep(20_000) }
        }
        try #require(
            fd >= 0,
            "fpctl exited or never opened the FIFO: \(String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self))"
        )
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let line = #"{"placement":"paywall","user_id":"late","ttl_seconds":300,"flow_file":"\#(flow)"}"# + "\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        put.waitUntilExit()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(put.terminationStatus == 0, "\(message)")
        let list = try fpctl("cache", "list", "--cache-dir", tmp.file("cache"), "--format", "csv")
        #expect(list.stdout.contains("paywall,late,"), "\(list.stdout)")
    }

    @Test(
        "warm's rows reach a file while the run goes on, in every format",
        arguments: ["table", "csv", "json"])
    func rowsStream(format: String) throws {
        // 40 identities, 2 at a time, 100 ms each: about 2 s of run.
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--latency", "100"])
        let tmp = try TemporaryDirectory()
        let ids = (0..<40).map { #"{"user_id":"u-\#($0)"}"# }.joined(separator: "\n") + "\n"
        try ids.write(toFile: tmp.file("ids.jsonl"), atomically: true, encoding: .utf8)
        let rows = tmp.file("rows.out")
        _ = FileManager.default.createFile(atPath: rows, contents: nil)
        let warm = Process()
        warm.executableURL = URL(fileURLWithPath: Paths.fpctl)
        warm.arguments = [
            "warm", "paywall", "--api-url", server.url, "--app-id", "demo", "--identities", tmp.file("ids.jsonl"),
            "--cache-dir", tmp.file("cache"), "--media", "none", "--format", format, "--concurrency", "2",
        ]
        warm.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: rows))
        warm.standardError = FileHandle.nullDevice
        try warm.run()
        var sawRowWhileRunning = false
        while warm.isRunning {
            let text = (try? String(contentsOfFile: rows, encoding: .utf8)) ?? ""
            if text.contains("paywall") && warm.isRunning {
                sawRowWhileRunning = true
                break
            }
            usleep(20_000)
        }
        warm.waitUntilExit()
        #expect(warm.terminationStatus == 0)
        #expect(sawRowWhileRunning, "no row reached the file before the run ended")
        let text = try String(contentsOfFile: rows, encoding: .utf8)
        // Every identity's row, once the run is over.
        #expect(text.split(separator: "\n").filter { $0.contains("u-") }.count == 40, "\(text)")
    }

    @Test(
        "warm with a slow input: each identity's row comes out while the input waits for its next line, and a burst of more lines than --concurrency all get their rows during the stall after it"
    )
    func rowsWhileInputWaits() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let tmp = try TemporaryDirectory()
        let fifo = tmp.file("ids")
        #expect(mkfifo(fifo, 0o644) == 0)
        let rows = tmp.file("rows.csv")
        _ = FileManager.default.createFile(atPath: rows, contents: nil)
        let warm = Process()
        warm.executableURL = URL(fileURLWithPath: Paths.fpctl)
        warm.arguments = [
            "warm", "paywall", "--api-url", server.url, "--app-id", "demo", "--identities", fifo, "--cache-dir",
            tmp.file("cache"), "--media", "none", "--format", "csv",
        ]
        warm.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: rows))
        warm.standardError = FileHandle.nullDevice
        try warm.run()
        defer { stop(warm) }
        // The writer side of the FIFO: opened once fpctl reads it.
        var fd: Int32 = -1
        let opened = Date().addingTimeInterval(20)
        while fd < 0 && warm.isRunning && Date() < opened {
            fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if fd < 0 { usleep(20_000) }
        }
        try #require(fd >= 0, "fpctl never opened the FIFO")
        defer { close(fd) }
        // One identity at a time, the next only once the last one's row is out
        // (with --concurrency 8, rows used to wait for 8 identities or the end).
        for i in 0..<3 {
            let line = #"{"user_id":"slow-\#(i)"}"# + "\n"
            _ = line.withCString { write(fd, $0, strlen($0)) }
            let deadline = Date().addingTimeInterval(15)
            var seen = false
            while !seen && Date() < deadline {
                seen = ((try? String(contentsOfFile: rows, encoding: .utf8)) ?? "").contains("slow-\(i) ")
                if !seen { usleep(20_000) }
            }
            #expect(seen, "the row of identity \(i) did not come out while the input waited")
            if !seen { return }
        }
        // 20 lines at once (more than --concurrency 8 resolve and 8 more are
        // read ahead), then nothing: every one of them gets its row while the
        // input stalls, none waits for a line that has not come.
        let burst = (0..<20).map { #"{"user_id":"burst-\#($0)"}"# + "\n" }.joined()
        _ = burst.withCString { write(fd, $0, strlen($0)) }
        let deadline = Date().addingTimeInterval(15)
        var missing = Array(0..<20)
        while !missing.isEmpty && Date() < deadline {
            let text = (try? String(contentsOfFile: rows, encoding: .utf8)) ?? ""
            missing.removeAll { text.contains("burst-\($0) ") }
            if !missing.isEmpty { usleep(20_000) }
        }
        #expect(missing.isEmpty, "rows held back while the input stalled: burst \(missing)")
        #expect(warm.isRunning, "the run waits for the rest of its input")
    }

    @Test(
        "a writer already waiting on the FIFO: what it writes is read, 20 times out of 20 (no close and reopen to lose it)"
    )
    func writerFirst() throws {
        let tmp = try TemporaryDirectory()
        let fifo = tmp.file("lines")
        #expect(mkfifo(fifo, 0o644) == 0)
        let input = tmp.file("in.jsonl")
        try writePutLine(input)
        for round in 0..<20 {
            let writer = Process()
            writer.executableURL = URL(fileURLWithPath: try tool("sh"))
            writer.arguments = ["-c", "cat '\(input)' > '\(fifo)'"]
            try writer.run()
            // The writer (the shell, opening the FIFO for its redirection) waits in open(2) for a reader.
            let deadline = Date().addingTimeInterval(10)
            while (try? String(contentsOfFile: "/proc/\(writer.processIdentifier)/wchan", encoding: .utf8))
                != "wait_for_partner"
            {
                try #require(
                    writer.isRunning && Date() < deadline, "round \(round): the writer never waited for a reader")
                usleep(2_000)
            }
            let cache = tmp.file("cache-\(round)")
            let put = try run(Paths.fpctl, ["cache", "put", "--cache-dir", cache, "--input", fifo], timeout: 20)
            if writer.isRunning { kill(writer.processIdentifier, SIGKILL) }
            writer.waitUntilExit()
            #expect(put.status == 0 && put.stderr.contains("wrote 1 entries"), "round \(round): \(put.stderr)")
            if put.status != 0 { return }
        }
    }
}
