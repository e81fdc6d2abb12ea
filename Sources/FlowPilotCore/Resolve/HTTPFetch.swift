import AsyncHTTPClient
import Foundation
import NIOCore

/// Plain GETs of media and fonts, with a size limit and a reason on failure.
enum HTTPClientRequestFactory {
    static func get(_ url: String) -> HTTPClientRequest {
        HTTPClientRequest(url: url)
    }

    enum Fetched: Sendable {
        case success(Data)
        case failure(String)
    }

    static func fetch(_ request: HTTPClientRequest, client: HTTPClient, limit: Int64) async -> Fetched {
        do {
            let response = try await client.execute(request, timeout: .seconds(30))
            guard response.status.code == 200 else { return .failure("answered \(response.status.code)") }
            if let length = response.headers.first(name: "Content-Length").flatMap(Int64.init), length > limit {
                return .failure("\(length) bytes, over the \(limit)-byte limit")
            }
            let body = try await response.body.collect(upTo: Int(limit))
            return .success(Data(body.readableBytesView))
        } catch {
            return .failure("\(error)".contains("tooManyBytes") ? "over the \(limit)-byte limit" : "download failed: \(error)")
        }
    }
}
