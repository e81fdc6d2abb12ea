import AsyncHTTPClient
import Foundation
import NIOCore

/// Plain GETs of images and fonts (warm, bundle pull): 200 only, a size limit,
/// a deadline for the whole download (head and body: a server that trickles
/// its body is cut off), and a reason on failure. The body is handed on chunk
/// by chunk as it arrives (`stream`), so a download holds one chunk in memory
/// whatever its size; `fetch` gathers it for callers that want the bytes.
enum MediaDownload {
    enum Fetched: Sendable {
        case success(Data)
        case failure(String)
    }

    /// The bytes of `url`, at most `limit` of them.
    static func fetch(
        _ url: String, transport: HTTPTransport, limit: Int64, timeout: Duration = .seconds(30),
        log: RequestCounts? = nil, pacer: RequestPacer? = nil
    ) async -> Fetched {
        let gathered = Gathered()
        if let problem = await stream(
            url, transport: transport, limit: limit, timeout: timeout, log: log, pacer: pacer,
            into: { gathered.data.append(contentsOf: $0.readableBytesView) })
        {
            return .failure(problem)
        }
        return .success(gathered.data)
    }

    private final class Gathered: @unchecked Sendable {
        var data = Data()
    }

    /// Streams the body of `url` to `sink`, in order; nil when it all came
    /// (200, at most `limit` bytes, before the deadline), else the reason.
    /// `log` counts the request under `media`: its status, or `error` when no
    /// response came; `pacer` gives it its slot among the run's requests.
    /// `sink` may throw to stop the download (its error's description is the reason).
    static func stream(
        _ url: String, transport: HTTPTransport, limit: Int64, timeout: Duration = .seconds(30),
        log: RequestCounts? = nil, pacer: RequestPacer? = nil,
        into sink: @escaping @Sendable (ByteBuffer) throws -> Void
    ) async -> String? {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "User-Agent", value: "fpctl/\(FPVersion.current)")
        if let problem = transport.trustProblem, HTTPTransport.needsTLS(url) {
            log?.record("media", status: nil)
            return problem.description
        }
        await pacer?.admit()
        let deadline = ContinuousClock.now + timeout
        let response: HTTPClientResponse
        let (client, proxy) = transport.route(url)
        do {
            response = try await client.execute(request, timeout: .nanoseconds(timeout.wholeNanoseconds))
        } catch {
            log?.record("media", status: nil)
            return "download failed: \(transport.failure(error, proxy: proxy).message)"
        }
        log?.record("media", status: Int(response.status.code))
        guard response.status.code == 200 else { return "answered \(response.status.code)" }
        if let length = response.headers.first(name: "Content-Length").flatMap(Int64.init), length > limit {
            return "\(length) bytes, over the \(limit)-byte limit"
        }
        do {
            try await Deadline.forEachChunk(of: response.body, limit: limit, until: deadline, sink)
            return nil
        } catch is Deadline.Exceeded {
            return "download took longer than \(timeout.components.seconds) s"
        } catch is Deadline.TooLarge {
            return "over the \(limit)-byte limit"
        } catch let error as FPError {
            return error.description
        } catch {
            return "download failed: \(transport.failure(error, proxy: proxy).message)"
        }
    }
}
