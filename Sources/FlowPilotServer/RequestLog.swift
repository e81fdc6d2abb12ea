import Foundation
import Hummingbird

/// One line per request on standard error: method, path, status, milliseconds.
/// Never the headers: the Authorization header carries the API key.
struct RequestLog<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let line = { (status: Int) in
            let ms = Double((ContinuousClock.now - start).components.attoseconds) / 1e15
                + Double((ContinuousClock.now - start).components.seconds) * 1000
            FileHandle.standardError.write(Data("\(request.method) \(request.uri.path) \(status) \(String(format: "%.1f", ms))ms\n".utf8))
        }
        do {
            let response = try await next(request, context)
            line(response.status.code)
            return response
        } catch {
            line((error as? any HTTPResponseError)?.status.code ?? 500)
            throw error
        }
    }
}
