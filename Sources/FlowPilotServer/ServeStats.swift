import Synchronization

/// Request counts for `GET /_admin/stats`: per route and per
/// (app, placement, user) key, so a test can assert how many resolves a client
/// really made.
final class ServeStats: Sendable {
    struct Snapshot: Encodable {
        let schemaVersion = 1
        let total: Int
        let routes: [String: Int]
        let keys: [String: Int]
    }

    private struct Key: Hashable {
        let app: String
        let placement: String
        let user: String
    }

    private struct Counts {
        var total = 0
        var routes: [String: Int] = [:]
        var keys: [Key: Int] = [:]
    }

    private let state = Mutex(Counts())

    func count(route: String) {
        state.withLock {
            $0.total += 1
            $0.routes[route, default: 0] += 1
        }
    }

    func count(app: String, placement: String, user: String) {
        let key = Key(app: app, placement: placement, user: user)
        state.withLock { $0.keys[key, default: 0] += 1 }
    }

    func snapshot() -> Snapshot {
        let counts = state.withLock { $0 }
        var keys: [String: Int] = [:]
        for (key, n) in counts.keys { keys[key.app + "/" + key.placement + "/" + key.user, default: 0] += n }
        return Snapshot(total: counts.total, routes: counts.routes, keys: keys)
    }

    func reset() {
        state.withLock { $0 = Counts() }
    }
}
