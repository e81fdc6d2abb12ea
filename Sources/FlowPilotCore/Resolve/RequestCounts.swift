import Synchronization

/// HTTP requests a run made, by endpoint (`resolve`, `resolve-batch`, `media`)
/// and status (the HTTP status code, or `error` when no response came). Every
/// attempt counts, retries included. Feeds `fpctl_warm_requests_total`.
public final class RequestCounts: Sendable {
    public struct Key: Hashable, Sendable {
        public let endpoint: String
        public let status: String
    }

    private let counts = Mutex<[Key: Int]>([:])

    public init() {}

    func record(_ endpoint: String, status: Int?) {
        let key = Key(endpoint: endpoint, status: status.map(String.init) ?? "error")
        counts.withLock { $0[key, default: 0] += 1 }
    }

    public var snapshot: [Key: Int] { counts.withLock { $0 } }
}
