import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix

/// Why a live resolve failed. Its `code` is the `error` column of a failed
/// PrefetchOutcome; `isUnreachable` is what decides `ExitStatus.unavailable`.
/// Transport errors are classified by their types (AsyncHTTPClient's and
/// NIO's), never by their descriptions, so a dependency rewording a message
/// cannot change an outcome or an exit status.
public enum ResolveFailure: Error, Sendable, Equatable {
    /// No connection could be made: refused, no route, name not found, connect timeout.
    case unreachable(String)
    /// No answer in time: the caller's resolveTimeout, or the transport's deadline.
    case timeout(String)
    /// The connection broke after it was made.
    case connection(String)
    /// 401 or 403: the API key is missing or wrong.
    case unauthorized(status: Int)
    /// Any other status outside 2xx, after retries.
    case http(status: Int)
    /// A body that is not JSON, has no `flow`, is too large, or holds a flow that
    /// fails validation. Never cached.
    case invalidResponse(String)
    /// The backend's own error code: a per-key batch error, or 404 `unknown_app`.
    case backend(code: String, message: String)
    /// A batch answer without a result for the requested key.
    case missingResult(placement: String)
    /// The flow came back but could not be written to the cache (disk full,
    /// read-only, file size limit): it is not warm, whatever a fallback holds.
    case cacheWrite(String)

    /// Stable, for tables, JSON and scripts: `unreachable`, `timeout`,
    /// `connection_error`, `unauthorized`, `http_503`, `invalid_response`,
    /// `missing_result`, or the backend's code.
    public var code: String {
        switch self {
        case .unreachable: "unreachable"
        case .timeout: "timeout"
        case .connection: "connection_error"
        case .unauthorized: "unauthorized"
        case .http(let status): "http_\(status)"
        case .invalidResponse: "invalid_response"
        case .backend(let code, _): code
        case .missingResult: "missing_result"
        case .cacheWrite: "cache-write"
        }
    }

    public var message: String {
        switch self {
        case .unreachable(let m), .timeout(let m), .connection(let m), .invalidResponse(let m), .cacheWrite(let m): m
        case .unauthorized(let status): "backend answered \(status): check the API key"
        case .http(let status): "backend answered \(status)"
        case .backend(_, let message): message
        case .missingResult(let placement): "the batch response has no result for \(placement)"
        }
    }

    /// The backend could not be reached at all (as opposed to answering badly).
    public var isUnreachable: Bool {
        if case .unreachable = self { return true }
        return false
    }

    /// The failure a transport error stands for, by its type.
    public static func transport(_ error: any Error) -> ResolveFailure {
        let text = String(describing: error).replacingOccurrences(of: "\n", with: " ")
        switch error {
        case let error as HTTPClientError:
            switch error {
            case .connectTimeout: return .unreachable("connect timed out")
            case .deadlineExceeded, .readTimeout, .writeTimeout: return .timeout("no answer before the deadline")
            case .remoteConnectionClosed: return .connection("the backend closed the connection")
            default: return .connection(text)
            }
        case is NIOConnectionError:
            // Every address of the host refused or failed (or it has none).
            return .unreachable("cannot connect: \(text)")
        case let error as IOError where Self.unreachableErrnos.contains(error.errnoCode):
            return .unreachable("cannot connect: \(String(cString: strerror(error.errnoCode)))")
        case let error as ChannelError:
            if case .connectTimeout = error { return .unreachable("connect timed out") }
            return .connection(text)
        case is NIOTooManyBytesError:
            return .invalidResponse("response body over the size limit")
        default:
            return .connection(text)
        }
    }

    private static let unreachableErrnos: Set<Int32> = [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL]
}
