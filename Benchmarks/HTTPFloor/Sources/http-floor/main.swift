// Usage: http-floor URL IDENTITIES CONCURRENCY
// Prints: identities/s and CPU (user+sys) microseconds per identity.
import AsyncHTTPClient
import Foundation
import NIOCore

let arguments = CommandLine.arguments
guard arguments.count == 4, let total = Int(arguments[2]), let concurrency = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: http-floor URL IDENTITIES CONCURRENCY\n".utf8))
    exit(64)
}
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

func cpu() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

let cpu0 = cpu()
let start = ContinuousClock.now
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
let elapsed = ContinuousClock.now - start
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
print(
    String(
        format: "http-floor %.0f identities/s %.1f us CPU per identity", Double(total) / seconds,
        (cpu() - cpu0) / Double(total) * 1e6))
try await client.shutdown()
