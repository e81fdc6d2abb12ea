import Foundation
import Hummingbird

/// One line per request on standard error: method, path, status, milliseconds.
/// Never the headers: the Authorization header carries the API key.
struct RequestLog<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            RequestLogLine.write(
                method: request.method.rawValue, path: request.uri.path, status: response.status.code, since: start)
            return response
        } catch {
            RequestLogLine.write(
                method: request.method.rawValue, path: request.uri.path,
                status: (error as? any HTTPResponseError)?.status.code ?? 500, since: start)
            throw error
        }
    }
}

/// The request log's line, shared by the router's middleware and the event-loop
/// fast path so both log alike.
enum RequestLogLine {
    static func write(method: String, path: some StringProtocol, status: Int, since start: ContinuousClock.Instant) {
        let elapsed = (ContinuousClock.now - start).components
        let ms = Double(elapsed.seconds) * 1000 + Double(elapsed.attoseconds) / 1e15
        FileHandle.standardError.write(Data("\(method) \(path) \(status) \(String(format: "%.1f", ms))ms\n".utf8))
    }
}
