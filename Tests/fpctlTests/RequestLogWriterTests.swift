import Foundation
import Synchronization
import Testing

@testable import FlowPilotServer

/// The request log's writer (docs/serve.md, "Stats and logs"): off the event
/// loop, bounded, in order, nothing lost.
@Suite("fpctl serve: the request log writer")
struct RequestLogWriterTests {
    /// Reads a pipe to its end on a thread of its own, once `start` is called.
    final class PipeReader: @unchecked Sendable {
        let pipe = Pipe()
        private let gate = DispatchSemaphore(value: 0)
        private let finished = DispatchSemaphore(value: 0)
        private(set) var data = Data()

        init() {
            Thread { [self] in
                gate.wait()
                data = pipe.fileHandleForReading.readDataToEndOfFile()
                finished.signal()
            }.start()
        }

        func start() { gate.signal() }

        func text() -> String {
            finished.wait()
            return String(decoding: data, as: UTF8.self)
        }
    }

    @Test("the line: method, path, status and milliseconds to a tenth")
    func line() {
        let line = RequestLogWriter.line(
            method: "POST", path: "/apps/demo/placements/paywall/resolve", status: 200,
            elapsed: .microseconds(1_249))
        #expect(String(decoding: line, as: UTF8.self) == "POST /apps/demo/placements/paywall/resolve 200 1.2ms\n")
        let slow = RequestLogWriter.line(method: "GET", path: "/x", status: 404, elapsed: .milliseconds(2_345))
        #expect(String(decoding: slow, as: UTF8.self) == "GET /x 404 2345.0ms\n")
        let path = "/media/a.png?v=1".prefix { $0 != "?" }
        let instant = RequestLogWriter.line(method: "GET", path: path, status: 304, elapsed: .zero)
        #expect(String(decoding: instant, as: UTF8.self) == "GET /media/a.png 304 0.0ms\n")
        let long = RequestLogWriter.line(method: "DELETE", path: "/", status: 503, elapsed: .seconds(86_400))
        #expect(String(decoding: long, as: UTF8.self) == "DELETE / 503 86400000.0ms\n")
    }

    @Test("a reader that stops holds the loggers back; once it reads, every line arrives, each thread's in order")
    func backpressureKeepsEveryLine() throws {
        let reader = PipeReader()
        let writer = RequestLogWriter(fd: reader.pipe.fileHandleForWriting.fileDescriptor, capacity: 4096)
        let logged = Atomic<Int>(0)
        let threads = 4
        let perThread = 20_000
        let done = DispatchGroup()
        for t in 0..<threads {
            done.enter()
            Thread {
                for i in 0..<perThread {
                    writer.append(Array("T\(t) \(i)\n".utf8))
                    logged.add(1, ordering: .relaxed)
                }
                done.leave()
            }.start()
        }
        // Nobody reads: the pipe (64 KiB) and the buffer (4 KiB) fill, and every logger is held
        // back. Waits for that event (a full run without backpressure would end instead).
        // The count is read once a round and kept: read again later, a logger let through by the
        // writer's last block into the pipe (and held again at once) could make it one short.
        var waiting = writer.loggersWaiting
        while waiting < threads, logged.load(ordering: .relaxed) < threads * perThread {
            sched_yield()
            waiting = writer.loggersWaiting
        }
        let whileBlocked = logged.load(ordering: .relaxed)
        #expect(waiting == threads, "a logger went on with nowhere to put its lines")
        // At most what the pipe, the buffer and the block being written hold (lines of 5 bytes or more).
        #expect(whileBlocked <= (65_536 + 2 * 4096) / 5 + threads, "more lines taken than there was room for")
        reader.start()
        done.wait()
        writer.close()
        try reader.pipe.fileHandleForWriting.close()
        let lines = reader.text().split(separator: "\n")
        #expect(lines.count == threads * perThread)
        var next = [Int](repeating: 0, count: threads)
        for line in lines {
            let parts = line.dropFirst().split(separator: " ")
            guard let t = Int(parts[0]), let i = Int(parts[1]) else {
                Issue.record("bad line \(line)")
                return
            }
            #expect(i == next[t], "thread \(t): line \(i) after \(next[t] - 1)")
            next[t] = i + 1
        }
    }

    @Test("lines reach the file while the server runs, not only at shutdown")
    func flushedWhileRunning() async throws {
        let server = try ServeProcess([Paths.sample("demo")])
        let request = try RawHTTPConnection(server.url)
        try request.send(request.request("POST", "/apps/demo/placements/paywall/resolve", body: #"{"user_id":"u"}"#))
        #expect(try request.readResponse().status == 200)
        // Flushed within 100 ms while the server keeps running; the bound only ends the
        // wait for a broken writer, so a starved machine cannot fail it.
        let deadline = ContinuousClock.now + .seconds(60)
        while !server.stderr.contains("POST /apps/demo/placements/paywall/resolve 200 "), ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(server.stderr.contains("POST /apps/demo/placements/paywall/resolve 200 "), "\(server.stderr)")
        #expect(server.stop() == 0)
    }
}
