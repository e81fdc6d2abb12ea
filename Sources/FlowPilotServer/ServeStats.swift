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
        /// Resolves being answered now, and the most at once since the last
        /// reset: what a client's concurrency reaches (docs/serve.md).
        let inFlight: Int
        let peakInFlight: Int
    }

    private struct Key: Hashable {
        let app: String
        let placement: String
        let user: String
    }

    /// The routes counted; each has an atomic counter, so counting a request
    /// takes no lock (the per-key counts below do).
    enum Route: String, CaseIterable {
        case resolve
        case resolveBatch = "resolve-batch"
        case media
    }

    private let resolves = Atomic<Int>(0)
    private let batches = Atomic<Int>(0)
    private let media = Atomic<Int>(0)
    private let keys = Mutex<[Key: Int]>([:])
    private let inFlight = Atomic<Int>(0)
    private let peakInFlight = Atomic<Int>(0)

    /// A resolve began being answered; `ended()` when its answer is handed on.
    func began() {
        let now = inFlight.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
        var peak = peakInFlight.load(ordering: .sequentiallyConsistent)
        while now > peak {
            let (exchanged, original) = peakInFlight.compareExchange(
                expected: peak, desired: now, ordering: .sequentiallyConsistent)
            if exchanged { break }
            peak = original
        }
    }

    func ended() {
        inFlight.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    @discardableResult
    private func counter<R>(_ route: Route, _ body: (borrowing Atomic<Int>) -> R) -> R {
        switch route {
        case .resolve: body(resolves)
        case .resolveBatch: body(batches)
        case .media: body(media)
        }
    }

    func count(route: Route) {
        counter(route) { $0.add(1, ordering: .sequentiallyConsistent) }
    }

    func count(app: String, placement: String, user: String) {
        let key = Key(app: app, placement: placement, user: user)
        keys.withLock { $0[key, default: 0] += 1 }
    }

    func snapshot() -> Snapshot {
        var routes: [String: Int] = [:]
        for route in Route.allCases {
            let n = counter(route) { $0.load(ordering: .sequentiallyConsistent) }
            if n > 0 { routes[route.rawValue] = n }
        }
        var keys: [String: Int] = [:]
        for (key, n) in self.keys.withLock({ $0 }) {
            keys[key.app + "/" + key.placement + "/" + key.user, default: 0] += n
        }
        return Snapshot(
            total: routes.values.reduce(0, +), routes: routes, keys: keys,
            inFlight: inFlight.load(ordering: .sequentiallyConsistent),
            peakInFlight: peakInFlight.load(ordering: .sequentiallyConsistent))
    }

    func reset() {
        for route in Route.allCases { counter(route) { $0.store(0, ordering: .sequentiallyConsistent) } }
        keys.withLock { $0 = [:] }
        peakInFlight.store(inFlight.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
    }
}
