import AsyncHTTPClient
import Foundation
import NIOCore

/// Plain GETs of images and fonts (warm, bundle pull): 200 only, a size limit,
/// and a reason on failure.
enum MediaDownload {
    enum Fetched: Sendable {
        case success(Data)
        case failure(String)
    }

    /// `log` counts the request under `media`: its status, or `error` when no
    /// response came; `pacer` gives it its slot among the run's requests.
    static func fetch(
        _ url: String, transport: HTTPTransport, limit: Int64, timeout: TimeAmount = .seconds(30),
        log: RequestCounts? = nil, pacer: RequestPacer? = nil
    ) async -> Fetched {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "User-Agent", value: "fpctl/\(FPVersion.current)")
        if let problem = transport.trustProblem, HTTPTransport.needsTLS(url) {
            log?.record("media", status: nil)
            return .failure(problem.description)
        }
        await pacer?.admit()
        let response: HTTPClientResponse
        let (client, proxy) = transport.route(url)
        do {
            response = try await client.execute(request, timeout: timeout)
        } catch {
            log?.record("media", status: nil)
            return .failure("download failed: \(transport.failure(error, proxy: proxy).message)")
        }
        log?.record("media", status: Int(response.status.code))
        guard response.status.code == 200 else { return .failure("answered \(response.status.code)") }
        if let length = response.headers.first(name: "Content-Length").flatMap(Int64.init), length > limit {
            return .failure("\(length) bytes, over the \(limit)-byte limit")
        }
        do {
            let body = try await response.body.collect(upTo: Int(limit))
            return .success(Data(body.readableBytesView))
        } catch is NIOTooManyBytesError {
            return .failure("over the \(limit)-byte limit")
        } catch {
            return .failure("download failed: \(transport.failure(error, proxy: proxy).message)")
        }
    }
}
