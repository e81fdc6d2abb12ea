// Usage: http-floor URL IDENTITIES CONCURRENCY [async|future]
// Prints: identities/s and CPU (user+sys) microseconds per identity.
// `async` (the default): AsyncHTTPClient's async `execute`, the API fpctl uses,
// from a task group. `future`: its EventLoopFuture `execute(request:)`, the
// body collected by the client, each completion starting the next request on
// the event loop (no task, no hop to the cooperative pool): the cheaper API
// swift-server/async-http-client#756 measures, #51's second floor.
import AsyncHTTPClient
import Foundation
import NIOCore

let arguments = CommandLine.arguments
guard arguments.count == 4 || arguments.count == 5, let total = Int(arguments[2]),
    let concurrency = Int(arguments[3]), arguments.count == 4 || ["async", "future"].contains(arguments[4])
else {
    FileHandle.standardError.write(Data("usage: http-floor URL IDENTITIES CONCURRENCY [async|future]\n".utf8))
    exit(64)
}
let futures = arguments.count == 5 && arguments[4] == "future"
let url = arguments[1] + "/apps/demo/placements/resolve-batch"

var configuration = HTTPClient.Configuration()
configuration.httpVersion = .automatic
configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: concurrency)
configuration.connectionPool.retryConnectionEstablishment = false
configuration.timeout = .init(connect: .seconds(3), read: .seconds(30))
let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)

func post(_ index: Int) async throws -> Int {
    var request = HTTPClientRequest(url: url)
    request.method = .POST
    request.headers.add(name: "Content-Type", value: "application/json")
    request.headers.add(name: "User-Agent", value: "http-floor")
    request.body = .bytes(
        ByteBuffer(string: #"{"attributes":{},"placement_keys":["onboarding","paywall"],"user_id":"u\#(index)"}"#))
    let response = try await client.execute(request, timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 16 << 20)
    return body.readableBytes
}

func postFuture(_ index: Int) -> EventLoopFuture<Int> {
    var request: HTTPClient.Request
    do {
        request = try HTTPClient.Request(url: url, method: .POST)
    } catch {
        return client.eventLoopGroup.next().makeFailedFuture(error)
    }
    request.headers.add(name: "Content-Type", value: "application/json")
    request.headers.add(name: "User-Agent", value: "http-floor")
    request.body = .string(#"{"attributes":{},"placement_keys":["onboarding","paywall"],"user_id":"u\#(index)"}"#)
    return client.execute(request: request, deadline: .now() + .seconds(30)).map { $0.body?.readableBytes ?? 0 }
}

/// The EventLoopFuture run: `concurrency` chains, each request's completion starting the next.
final class Chains: @unchecked Sendable {
    let lock = NSLock()
    var next: Int
    var remaining: Int
    let done: EventLoopPromise<Void>

    init(total: Int, started: Int, done: EventLoopPromise<Void>) {
        (next, remaining, self.done) = (started, total, done)
    }

    func run(_ index: Int, total: Int) {
        postFuture(index).whenComplete { result in
            if case .failure(let error) = result { self.done.fail(error) }
            self.lock.lock()
            self.remaining -= 1
            let following: Int? = self.next < total ? self.next : nil
            if following != nil { self.next += 1 }
            let finished = self.remaining == 0
            self.lock.unlock()
            if let following { self.run(following, total: total) }
            if finished { self.done.succeed(()) }
        }
    }
}

func cpu() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

let cpu0 = cpu()
let start = ContinuousClock.now
if futures {
    let started = min(concurrency, total)
    let chains = Chains(total: total, started: started, done: client.eventLoopGroup.next().makePromise(of: Void.self))
    for index in 0..<started { chains.run(index, total: total) }
    try await chains.done.futureResult.get()
} else {
    try await withThrowingTaskGroup(of: Int.self) { group in
        var next = 0
        while next < min(concurrency, total) {
            let index = next
            group.addTask { try await post(index) }
            next += 1
        }
        while try await group.next() != nil {
            if next < total {
                let index = next
                group.addTask { try await post(index) }
                next += 1
            }
        }
    }
}
let elapsed = ContinuousClock.now - start
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
print(
    String(
        format: "http-floor (\(futures ? "future" : "async")) %.0f identities/s %.1f us CPU per identity",
        Double(total) / seconds,
        (cpu() - cpu0) / Double(total) * 1e6))
try await client.shutdown()
