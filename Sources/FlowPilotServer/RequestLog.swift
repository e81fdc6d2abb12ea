import FlowPilotCore
import Foundation
import Hummingbird

/// One line per request on standard error: method, path, status, milliseconds.
/// Never the headers: the Authorization header carries the API key.
struct RequestLog<Context: RequestContext>: RouterMiddleware {
    let writer: RequestLogWriter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            writer.log(
                method: request.method.rawValue, path: request.uri.path, status: response.status.code, since: start)
            return response
        } catch {
            writer.log(
                method: request.method.rawValue, path: request.uri.path,
                status: (error as? any HTTPResponseError)?.status.code ?? 500, since: start)
            throw error
        }
    }
}

/// The request log, written off the event loops (docs/serve.md, "Request log").
///
/// Lines go into one bounded buffer, in the order they are logged (so per
/// connection, in request order); a thread of its own writes the buffer out at
/// least every 100 ms, as soon as it is half full, and at `close()`. When the
/// buffer is full, `log` waits for the writer: a slow disk slows the server
/// rather than dropping lines or growing memory.
final class RequestLogWriter: @unchecked Sendable {
    static let flushInterval: TimeInterval = 0.1
    let capacity: Int
    private let fd: Int32
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var buffer: [UInt8] = []
    private var closed = false
    private var writerSignalled = false
    private let done = DispatchSemaphore(value: 0)

    static let defaultCapacity = 256 * 1024

    init(fd: Int32 = STDERR_FILENO, capacity: Int = RequestLogWriter.defaultCapacity) {
        self.fd = fd
        self.capacity = capacity
        buffer.reserveCapacity(capacity)
        let thread = Thread { [self] in run() }
        thread.name = "fpctl-request-log"
        thread.start()
    }

    func log(method: String, path: some StringProtocol, status: Int, since start: ContinuousClock.Instant) {
        append(Self.line(method: method, path: path, status: status, elapsed: ContinuousClock.now - start))
    }

    /// `METHOD PATH STATUS 12.3ms\n`, built byte by byte: no formatter, no
    /// interpolated string, one array of the right size.
    static func line(method: String, path: some StringProtocol, status: Int, elapsed: Duration) -> [UInt8] {
        let (seconds, attoseconds) = elapsed.components
        let tenths = seconds * 10_000 + (attoseconds + 50_000_000_000_000) / 100_000_000_000_000
        var line: [UInt8] = []
        line.reserveCapacity(method.utf8.count + path.utf8.count + 48)
        method.withUTF8Bytes { line.append(contentsOf: $0) }
        line.append(UInt8(ascii: " "))
        path.withUTF8Bytes { line.append(contentsOf: $0) }
        line.append(UInt8(ascii: " "))
        DecimalText.append(Int64(status), to: &line)
        line.append(UInt8(ascii: " "))
        DecimalText.append(tenths / 10, to: &line)
        line.append(UInt8(ascii: "."))
        line.append(UInt8(ascii: "0") + UInt8(abs(tenths % 10)))
        line += "ms\n".utf8
        return line
    }

    func append(_ line: [UInt8]) {
        condition.lock()
        defer { condition.unlock() }
        while buffer.count + line.count > capacity, !buffer.isEmpty, !closed {
            signalWriter()
            waiting += 1
            condition.wait()
            waiting -= 1
        }
        buffer += line
        if buffer.count >= capacity / 2 { signalWriter() }
    }

    /// Loggers held back in `append` right now, waiting for room (under `condition`).
    private var waiting = 0

    /// How many loggers wait for room: the event the backpressure test waits for.
    var loggersWaiting: Int {
        condition.lock()
        defer { condition.unlock() }
        return waiting
    }

    /// Writes what is buffered and stops the writer thread; later lines are dropped.
    func close() {
        condition.lock()
        guard !closed else {
            condition.unlock()
            return
        }
        closed = true
        condition.broadcast()
        condition.unlock()
        done.wait()
    }

    private func signalWriter() {
        guard !writerSignalled else { return }
        writerSignalled = true
        condition.broadcast()
    }

    private func run() {
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        while true {
            condition.lock()
            if !closed && !writerSignalled {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Self.flushInterval))
            }
            writerSignalled = false
            swap(&out, &buffer)
            let finished = closed
            condition.broadcast()  // room again for anyone waiting in `append`
            condition.unlock()
            writeAll(out)
            out.removeAll(keepingCapacity: true)
            if finished { break }
        }
        done.signal()
    }

    /// A log whose file or stderr is gone has nothing left to tell: the error is dropped.
    private func writeAll(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { FlowPilotCore.writeAll(fd, $0) }
    }
}
