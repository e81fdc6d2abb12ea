import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import FlowPilotCore

@Suite("transport errors are classified by type")
struct ResolveFailureTests {
    @Test("AsyncHTTPClient's and NIO's error types map to stable codes")
    func byType() {
        #expect(ResolveFailure.transport(HTTPClientError.connectTimeout).code == "unreachable")
        #expect(ResolveFailure.transport(HTTPClientError.deadlineExceeded).code == "timeout")
        #expect(ResolveFailure.transport(HTTPClientError.readTimeout).code == "timeout")
        #expect(ResolveFailure.transport(HTTPClientError.remoteConnectionClosed).code == "connection_error")
        #expect(ResolveFailure.transport(IOError(errnoCode: ECONNREFUSED, reason: "connect")).code == "unreachable")
        #expect(ResolveFailure.transport(IOError(errnoCode: ECONNRESET, reason: "read")).code == "connection_error")
        #expect(ResolveFailure.transport(ChannelError.connectTimeout(.seconds(1))).code == "unreachable")
        #expect(ResolveFailure.transport(NIOTooManyBytesError(maxBytes: 16)).code == "invalid_response")
        struct Unknown: Error, CustomStringConvertible { var description: String { "connect refused timeout" } }
        #expect(ResolveFailure.transport(Unknown()).code == "connection_error", "words in a description decide nothing")
    }

    @Test("a refused port is unreachable, through the real client")
    func refusedPort() async throws {
        // Bind a port, then close it: nothing listens there now.
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(
            host: "127.0.0.1", port: 0
        ).get()
        let port = try #require(channel.localAddress?.port)
        try await channel.close()
        let client = ResolveClient(baseURL: "http://127.0.0.1:\(port)", appID: "demo", apiKey: nil, retries: 0)
        guard case .failed(let failure) = await client.resolve("paywall", Identity(userID: "u")) else {
            Issue.record("a refused port resolved")
            return
        }
        #expect(failure.code == "unreachable" && failure.isUnavailable, "\(failure)")
    }
}

/// A thread-safe counter for tests.
final class Counter: Sendable {
    private let state = Mutex(0)
    var value: Int { state.withLock { $0 } }

    @discardableResult func increment() -> Int {
        state.withLock { value in
            value += 1
            return value
        }
    }

    func decrement() { state.withLock { $0 -= 1 } }
    func max(_ candidate: Int) { state.withLock { $0 = Swift.max($0, candidate) } }
}

/// Holds tasks until opened.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
