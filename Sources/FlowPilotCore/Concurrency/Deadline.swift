import AsyncHTTPClient
import NIOCore

/// A deadline for a whole response body, which AsyncHTTPClient's own deadline
/// does not cover (it ends when the head arrives). Checked as each chunk
/// arrives, so a server that trickles a byte a second is cut off at its next
/// byte past the deadline, with no task or timer per request; a body that
/// stops altogether ends by the client's read timeout (`HTTPTransport`: 30 s
/// without a byte).
enum Deadline {
    struct Exceeded: Error {}
    struct TooLarge: Error {}

    /// Hands each chunk of `body` to `sink` until it ends; throws `Exceeded`
    /// past `deadline`, `TooLarge` past `limit` bytes.
    static func forEachChunk(
        of body: HTTPClientResponse.Body, limit: Int64, until deadline: ContinuousClock.Instant,
        _ sink: (ByteBuffer) throws -> Void
    ) async throws {
        var received: Int64 = 0
        for try await chunk in body {
            guard ContinuousClock.now <= deadline else { throw Exceeded() }
            received += Int64(chunk.readableBytes)
            guard received <= limit else { throw TooLarge() }
            try sink(chunk)
        }
    }

    /// The whole body in one buffer, within `limit` and `deadline`.
    static func collect(
        _ body: HTTPClientResponse.Body, limit: Int, until deadline: ContinuousClock.Instant
    ) async throws -> ByteBuffer {
        var all: ByteBuffer?
        try await forEachChunk(of: body, limit: Int64(limit), until: deadline) { chunk in
            if all == nil { all = chunk } else { all?.writeImmutableBuffer(chunk) }
        }
        return all ?? ByteBuffer()
    }
}

extension Duration {
    /// Whole nanoseconds (a deadline's resolution), saturating.
    var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        return whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
