import Synchronization

/// Request counts for `GET /_admin/stats`: per route and per
/// (app, placement, user) key, so a test can assert how many resolves a client
/// really made.
final class ServeStats: Sendable {
    struct Snapshot: Encodable {
        let schema_version = 1
        let total: Int
        let routes: [String: Int]
        let keys: [String: Int]
    }

    private let state = Mutex<(total: Int, routes: [String: Int], keys: [String: Int])>((0, [:], [:]))

    func count(route: String) {
        state.withLock {
            $0.total += 1
            $0.routes[route, default: 0] += 1
        }
    }

    func count(app: String, placement: String, user: String) {
        let key = app + "/" + placement + "/" + user
        state.withLock { $0.keys[key, default: 0] += 1 }
    }

    func snapshot() -> Snapshot {
        state.withLock { Snapshot(total: $0.total, routes: $0.routes, keys: $0.keys) }
    }

    func reset() {
        state.withLock { $0 = (0, [:], [:]) }
    }
}
