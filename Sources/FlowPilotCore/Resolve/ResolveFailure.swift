import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// Why a live resolve failed. Its `code` is the `error` column of a failed
/// PrefetchOutcome; `isUnavailable` is what `BackendReach` counts; its
/// `description` (`code: message`) is how every command names it.
/// Transport errors are classified by their types (AsyncHTTPClient's and
/// NIO's), never by their descriptions, so a dependency rewording a message
/// cannot change an outcome or an exit status.
public enum ResolveFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection could be made: refused, no route, name not found, connect timeout.
    case unreachable(String)
    /// No answer in time: the caller's resolveTimeout, or the transport's deadline.
    case timeout(String)
    /// The connection broke after it was made.
    case connection(String)
    /// The TLS handshake failed: a certificate not trusted, not matching the
    /// host, expired, or a server that does not speak TLS.
    case tls(String)
    /// The proxy could not be reached, refused the tunnel or wants credentials.
    case proxy(String)
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
        case .tls: "tls"
        case .proxy: "proxy"
        case .unauthorized: "unauthorized"
        case .http(let status): "http_\(status)"
        case .invalidResponse: "invalid_response"
        case .backend(let code, _): code
        case .missingResult: "missing_result"
        case .cacheWrite: "cache-write"
        }
    }

    /// `code: message`, the one way a failure is named to a person.
    public var description: String { "\(code): \(message)" }

    /// The server's certificate chain is not trusted: `HTTPTransport.failure` says how to add a CA.
    var isUntrustedCertificate: Bool {
        if case .tls(let m) = self { return m.contains("CERTIFICATE_VERIFY_FAILED") }
        return false
    }

    public var message: String {
        switch self {
        case .unreachable(let m), .timeout(let m), .connection(let m), .tls(let m), .proxy(let m),
            .invalidResponse(let m), .cacheWrite(let m):
            m
        case .unauthorized(let status): "backend answered \(status): check the API key"
        case .http(let status): "backend answered \(status)"
        case .backend(_, let message): message
        case .missingResult(let placement): "the batch response has no result for \(placement)"
        }
    }

    /// No answer came from the backend at all (as opposed to answering badly):
    /// unreachable, a failed TLS handshake, or a proxy in the way.
    public var isUnavailable: Bool {
        switch self {
        case .unreachable, .tls, .proxy: true
        default: false
        }
    }

    /// The failure a transport error stands for, by its type. `proxy` is the
    /// proxy the request went through, if any: every connection is then made to
    /// it, so not reaching it, or a tunnel it refused, is a `proxy` failure.
    public static func transport(_ error: any Error, proxy: ProxyEndpoint? = nil) -> ResolveFailure {
        let failure = classify(error, proxy: proxy)
        if let proxy, case .unreachable = failure { return .proxy("cannot connect to the proxy \(proxy)") }
        return failure
    }

    private static func classify(_ error: any Error, proxy: ProxyEndpoint?) -> ResolveFailure {
        let text = String(describing: error).replacingOccurrences(of: "\n", with: " ")
        let theProxy = proxy.map { "the proxy \($0)" } ?? "the proxy"
        switch error {
        case is Deadline.Exceeded:
            return .timeout("the body did not arrive before the deadline")
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return .tls("the certificate does not match the host name")
        case is NIOSSLError, is NIOSSLExtraError, is BoringSSLError:
            return .tls("handshake failed: \(tlsReason(text))")
        case let error as HTTPClientError:
            switch error {
            case .tlsHandshakeTimeout: return .tls("handshake timed out")
            case .invalidProxyResponse: return .proxy("\(theProxy) refused the request")
            case .proxyAuthenticationRequired: return .proxy("\(theProxy) asks for credentials (407)")
            case .httpProxyHandshakeTimeout: return .proxy("\(theProxy) did not answer in time")
            case .connectTimeout: return .unreachable("connect timed out")
            case .deadlineExceeded, .readTimeout, .writeTimeout: return .timeout("no answer before the deadline")
            case .remoteConnectionClosed: return .connection("the backend closed the connection")
            default: return .connection(text)
            }
        case is NIOConnectionError:
            // Every address of the host refused or failed (or it has none).
            return .unreachable("cannot connect: \(text)")
        case let error as IOError where Self.unreachableErrnos.contains(error.errnoCode):
            return .unreachable("cannot connect: \(Errno.describe(error.errnoCode))")
        case let error as ChannelError:
            if case .connectTimeout = error { return .unreachable("connect timed out") }
            return .connection(text)
        case is NIOTooManyBytesError, is Deadline.TooLarge:
            return .invalidResponse("response body over the size limit")
        default:
            return .connection(text)
        }
    }

    /// The TLS library's reason, short: `CERTIFICATE_VERIFY_FAILED` says more
    /// than the whole error stack it comes in. Only the message uses it.
    private static func tlsReason(_ text: String) -> String {
        let reasons = text.split(whereSeparator: { !($0.isUppercase || $0 == "_" || $0.isNumber) })
            .filter { $0.count >= 8 && $0.contains("_") }
        guard let reason = reasons.last else { return text }
        switch reason {
        case "CERTIFICATE_VERIFY_FAILED":
            return "the certificate is not trusted (CERTIFICATE_VERIFY_FAILED)"
        case "WRONG_VERSION_NUMBER":
            return "the server does not speak TLS on that port (WRONG_VERSION_NUMBER)"
        default:
            return String(reason)
        }
    }

    private static let unreachableErrnos: Set<Int32> = [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL]
}
