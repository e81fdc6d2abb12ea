import Foundation
@_spi(Internal) import Hummingbird
import Testing

@testable import FlowPilotServer

/// `fpctl serve` answers every resolve request on the event loop (`ResolveHandler`)
/// and passes admin, media and fonts to Hummingbird's router (docs/serve.md, "One
/// path per route"). On one connection, answers come in request order whoever
/// writes them, and a resolve's answer does not depend on how its path is spelled
/// or whether the connection closes after it.
@Suite("fpctl serve: resolve answers, in order, whatever the spelling or the connection")
struct ServeResolveHandlerTests {
    static let user = #"{"user_id":"u1","attributes":{"plan":"free","country":"DE"}}"#

    @Test("pipelined requests are answered in order, whether the router or the resolve handler answers each")
    func pipelining() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let c = try RawHTTPConnection(server.url)
        // Admin route (router), resolve, resolve with a trailing slash, a batch and
        // the stats (router), all in one write.
        var burst = c.request("GET", "/_admin/faults")
        burst += c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user)
        burst += c.request("POST", "/apps/demo/placements/onboarding/resolve/", body: Self.user)
        burst += c.request(
            "POST", "/apps/demo/placements/resolve-batch",
            body: #"{"user_id":"u1","placement_keys":["onboarding","paywall"]}"#)
        burst += c.request("GET", "/_admin/stats")
        try c.send(burst)

        let faults = try c.readResponse()
        #expect(faults.status == 200 && faults.json != nil && faults.json?["placement_key"] == nil)
        let paywall = try c.readResponse()
        #expect(paywall.status == 200 && paywall.json?["placement_key"] as? String == "paywall")
        let onboarding = try c.readResponse()
        #expect(onboarding.status == 200 && onboarding.json?["placement_key"] as? String == "onboarding")
        let batch = try c.readResponse()
        let results = batch.json?["results"] as? [[String: Any]]
        #expect(results?.compactMap { $0["placement_key"] as? String } == ["onboarding", "paywall"])
        let stats = try c.readResponse()
        let routes = stats.json?["routes"] as? [String: Int]
        #expect(routes?["resolve"] == 2 && routes?["resolve-batch"] == 1)
        #expect((stats.json?["keys"] as? [String: Int])?["demo/paywall/u1"] == 2)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let route: String
        let body: String
        var headers: [String] = []
        let status: Int
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "a flow", route: "paywall/resolve", body: user, status: 200),
        Case(name: "unknown placement", route: "nope/resolve", body: user, status: 404),
        Case(name: "malformed JSON", route: "paywall/resolve", body: "{nope", status: 400),
        Case(
            name: "attributes not an object", route: "paywall/resolve", body: #"{"user_id":"u1","attributes":[1]}"#,
            status: 400),
        Case(name: "no user_id", route: "paywall/resolve", body: #"{"attributes":{}}"#, status: 400),
        Case(
            name: "body over 64 KiB", route: "paywall/resolve",
            body: #"{"user_id":"u1","pad":""# + String(repeating: "x", count: 70_000) + #""}"#, status: 413),
        Case(
            name: "batch with an unknown key", route: "resolve-batch",
            body: #"{"user_id":"u1","placement_keys":["paywall","nope"]}"#, status: 200),
        Case(name: "batch without keys", route: "resolve-batch", body: user, status: 400),
        Case(name: "no API key", route: "paywall/resolve", body: user, headers: ["X-Key: none"], status: 401),
        Case(
            name: "wrong API key", route: "paywall/resolve", body: user, headers: ["Authorization: Bearer nope"],
            status: 401),
        Case(
            name: "right API key", route: "paywall/resolve", body: user, headers: ["Authorization: Bearer k_fast"],
            status: 200),
    ]

    /// The same request three ways: plain, with a trailing slash, and with
    /// `Connection: close` (after which the server closes the connection).
    private func threeWays(_ server: ServeProcess, app: String, _ c: Case) throws -> [RawHTTPConnection.Response] {
        let plain = try RawHTTPConnection(server.url)
        try plain.send(plain.request("POST", "/apps/\(app)/placements/\(c.route)", body: c.body, headers: c.headers))
        let slash = try RawHTTPConnection(server.url)
        try slash.send(slash.request("POST", "/apps/\(app)/placements/\(c.route)/", body: c.body, headers: c.headers))
        let closing = try RawHTTPConnection(server.url)
        try closing.send(
            closing.request(
                "POST", "/apps/\(app)/placements/\(c.route)", body: c.body,
                headers: c.headers + ["Connection: close"]))
        let answers = try [plain.readResponse(), slash.readResponse(), closing.readResponse()]
        #expect(answers[2].headers["connection"] == "close")
        #expect(try closing.closedByServer(), "the connection stays open after Connection: close")
        return answers
    }

    private func expectAlike(_ answers: [RawHTTPConnection.Response], _ name: String) {
        let first = answers[0]
        for other in answers.dropFirst() {
            #expect(other.status == first.status, "\(name): status")
            #expect(other.body == first.body, "\(name): \(first.text) vs \(other.text)")
            #expect(other.headers["content-type"] == first.headers["content-type"], "\(name): content type")
            #expect(other.headers["retry-after"] == first.headers["retry-after"], "\(name): Retry-After")
        }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        format.timeZone = TimeZone(identifier: "GMT")
        for answer in answers {
            let date = answer.headers["date"].flatMap(format.date(from:))
            #expect(
                date.map { abs($0.timeIntervalSinceNow) < 60 } == true,
                "\(name): Date \(answer.headers["date"] ?? "missing")")
        }
    }

    @Test("same status, headers and bytes whatever the spelling or the connection", arguments: cases)
    func sameAnswers(_ c: Case) throws {
        let tmp = try TemporaryDirectory()
        try "k_fast\n".write(toFile: tmp.file("key"), atomically: true, encoding: .utf8)
        let keyed = c.name.contains("API key")
        let server = try ServeProcess(
            [Paths.sample("demo"), Paths.sample("travel"), "-q", "--ttl", "60", "--rewrite-asset-urls"]
                + (keyed ? ["--api-key-file", tmp.file("key")] : []))
        let answers = try threeWays(server, app: "demo", c)
        expectAlike(answers, c.name)
        #expect(answers[0].status == c.status)
        if c.name == "a flow" {
            // Rewritten asset URLs name the address the client used, every way.
            #expect(answers[0].text.contains("http://\(try RawHTTPConnection(server.url).hostHeader)/media/"))
        }
    }

    @Test("rewritten answers are encoded once per Host, name that Host, and stay the same with Connection: close")
    func rewrittenPerHost() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        // Past the 16 base URLs kept pre-encoded, answers are encoded per request, and still right.
        let hosts = ["a.example:1", "b.example:2", "a.example:1"] + (0..<20).map { "h\($0).example" } + ["b.example:2"]
        var first: [String: Data] = [:]
        for host in hosts {
            let answers = try [[], ["Connection: close"]].map { extra in
                let connection = try RawHTTPConnection(server.url)
                connection.hostHeader = host
                try connection.send(
                    connection.request(
                        "POST", "/apps/demo/placements/onboarding/resolve", body: Self.user, headers: extra))
                return try connection.readResponse()
            }
            expectAlike(answers, host)
            #expect(answers[0].text.contains("\"src\":\"http://\(host)/media/"), "\(host): \(answers[0].text)")
            #expect(
                answers[0].text.range(of: #"https://cdn\.example\.com/[^"]*\.(png|ttf)""#, options: .regularExpression)
                    == nil, "\(host): every bundled image and font URL is rewritten")
            if let earlier = first[host] { #expect(answers[0].body == earlier, "\(host): the same bytes again") }
            first[host] = answers[0].body
        }
    }

    @Test("targeting and every body fault give the same answer whatever the spelling or the connection")
    func faultsAndTargeting() async throws {
        let server = try ServeProcess([Paths.sample("travel"), "-q"])
        let german = Case(
            name: "targeted", route: "trip-upsell/resolve",
            body: #"{"user_id":"u7","attributes":{"country":"DE","plan":"free"}}"#, status: 200)
        expectAlike(try threeWays(server, app: "travel", german), "targeting")
        let faults: [String: String] = [
            "fail 429": #"{"fail_rate":1,"fail_status":429,"retry_after":7}"#,
            "truncated": #"{"truncate_body":true}"#,
            "invalid JSON": #"{"invalid_json":true}"#,
            "no flow": #"{"no_flow":["trip-upsell"]}"#,
            "invalid flow": #"{"invalid_flow":true}"#,
            "other placement only": #"{"invalid_json":true,"placements":["welcome"]}"#,
        ]
        for (name, json) in faults {
            let set = try await http(.POST, "\(server.url)/_admin/faults", body: Data(json.utf8))
            #expect(set.status == 200, "\(name)")
            let answers = try threeWays(server, app: "travel", german)
            expectAlike(answers, name)
            #expect((answers[0].status == 429) == (name == "fail 429"), "\(name)")
            #expect((answers[0].json == nil) == (name == "truncated" || name == "invalid JSON"), "\(name)")
        }
    }

    /// The server's `in_flight` once it is `count`, asked over `watcher`
    /// until it is (a hold keeps it there; the bound only ends a broken
    /// server's run), or the last answer.
    static func inFlight(_ count: Int, watching watcher: RawHTTPConnection) throws -> Int? {
        var seen: Int?
        let started = ContinuousClock.now
        while seen != count, ContinuousClock.now - started < .seconds(300) {
            try watcher.send(watcher.request("GET", "/_admin/stats"))
            seen = try watcher.readResponse().json?["in_flight"] as? Int
        }
        return seen
    }

    @Test(
        "a resolve held by a hold fault is in flight until the faults change, and the answers pipelined behind it come in order, each after its latency"
    )
    func latencyInOrder() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let faults = "\(server.url)/_admin/faults"
        let hold = try await http(.POST, faults, body: Data(#"{"hold":true,"latency_ms":[300]}"#.utf8))
        #expect(hold.status == 200)
        let c = try RawHTTPConnection(server.url)
        var burst = c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user)
        burst += c.request("GET", "/_admin/stats")
        burst += c.request("POST", "/apps/demo/placements/onboarding/resolve", body: Self.user)
        try c.send(burst)
        // Held until the faults change: another connection sees it in flight however late it looks (the
        // bound only ends a broken server's run).
        let watcher = try RawHTTPConnection(server.url)
        let seen = try Self.inFlight(1, watching: watcher)
        #expect(seen == 1, "in flight while the hold fault holds the first resolve")
        try watcher.send(watcher.request("GET", "/_admin/stats"))
        #expect(
            (try watcher.readResponse().json?["routes"] as? [String: Int])?["resolve"] == 1,
            "the second resolve is not read while the first is owed")

        // Replacing the faults lets the first go, after the 300 ms it drew; the second waits its own.
        let released = ContinuousClock.now
        let latency = try await http(.POST, faults, body: Data(#"{"latency_ms":[300]}"#.utf8))
        #expect(latency.status == 200)
        let paywall = try c.readResponse()
        #expect(paywall.json?["placement_key"] as? String == "paywall")
        let stats = try c.readResponse()
        // The stats were asked after the first resolve and before the second.
        #expect((stats.json?["routes"] as? [String: Int])?["resolve"] == 1, "\(stats.text)")
        let onboarding = try c.readResponse()
        #expect(onboarding.json?["placement_key"] as? String == "onboarding")
        #expect(ContinuousClock.now - released >= .milliseconds(590), "each resolve waited its 300 ms")
        let after = try await http(.GET, "\(server.url)/_admin/stats")
        #expect(after.json?["in_flight"] as? Int == 0)
        #expect(after.json?["peak_in_flight"] as? Int == 1)
    }

    @Test(
        "a held resolve whose connection closes is no longer in flight, and replacing the faults after it is harmless"
    )
    func holdThenClose() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let faults = "\(server.url)/_admin/faults"
        #expect(try await http(.POST, faults, body: Data(#"{"hold":true}"#.utf8)).status == 200)
        let watcher = try RawHTTPConnection(server.url)
        do {
            // Closed when it goes out of scope here.
            let c = try RawHTTPConnection(server.url)
            try c.send(c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user))
            #expect(try Self.inFlight(1, watching: watcher) == 1)
        }
        #expect(try Self.inFlight(0, watching: watcher) == 0, "the closed connection's held resolve ended with it")
        #expect(try await http(.DELETE, faults).status == 204)
        let fresh = try await http(
            .POST, "\(server.url)/apps/demo/placements/paywall/resolve", body: Data(Self.user.utf8))
        #expect(fresh.status == 200, "answered at once once the hold is gone")
    }

    @Test("a graceful stop lets a held resolve go: its client gets the answer, and the server exits")
    func holdThenStop() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        #expect(try await http(.POST, "\(server.url)/_admin/faults", body: Data(#"{"hold":true}"#.utf8)).status == 200)
        let c = try RawHTTPConnection(server.url)
        try c.send(c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user))
        let watcher = try RawHTTPConnection(server.url)
        let seen = try Self.inFlight(1, watching: watcher)
        #expect(seen == 1)
        // Signalled here, then read: no second task, which a pool of blocked test threads could keep from running.
        kill(server.process.processIdentifier, SIGTERM)
        let answer = try c.readResponse()
        #expect(answer.status == 200 && answer.json?["placement_key"] as? String == "paywall")
        #expect(answer.head.contains("Connection: close"), "\(answer.head)")
        // Waited for, not signalled again: a second signal ends serve at once.
        server.process.waitUntilExit()
        #expect(server.process.terminationStatus == 0)
    }

    @Test("HTTP/1.0 gets its answer and the connection closes; with keep-alive it stays open")
    func http10() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let body = Self.user
        let request = { (extra: String) in
            "POST /apps/demo/placements/paywall/resolve HTTP/1.0\r\n\(extra)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        }
        let closing = try RawHTTPConnection(server.url)
        try closing.send(request(""))
        #expect(try closing.readResponse().json?["placement_key"] as? String == "paywall")
        #expect(try closing.closedByServer())

        let kept = try RawHTTPConnection(server.url)
        try kept.send(request("Connection: keep-alive\r\n"))
        #expect(try kept.readResponse().status == 200)
        try kept.send(request("Connection: keep-alive\r\n"))
        #expect(try kept.readResponse().json?["placement_key"] as? String == "paywall")
    }

    @Test("close_connection sends half the body, then closes")
    func closeMidBody() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let whole = try RawHTTPConnection(server.url)
        try whole.send(whole.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user))
        let expected = try whole.readResponse().body.count
        let set = try await http(.POST, "\(server.url)/_admin/faults", body: Data(#"{"close_connection":true}"#.utf8))
        #expect(set.status == 200)
        let c = try RawHTTPConnection(server.url)
        try c.send(c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user))
        #expect(throws: RawHTTPConnection.Failure.self) { try c.readResponse() }
        let received = c.unread
        #expect(received.count == expected / 2, "\(received.count) of \(expected) bytes")
    }

    @Test("an answer's head is a status line and headers in a fixed order, the reason phrase as NIO names it")
    func heads() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let c = try RawHTTPConnection(server.url)
        func lines(_ response: RawHTTPConnection.Response) -> [String] {
            response.head.components(separatedBy: "\r\n").map { $0.hasPrefix("Date: ") ? "Date: *" : $0 }
        }
        try c.send(c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user))
        let ok = try c.readResponse()
        #expect(
            lines(ok) == [
                "HTTP/1.1 200 OK", "Content-Type: application/json", "Content-Length: \(ok.body.count)", "Date: *",
            ])
        let date = try #require(ok.headers["date"])
        #expect(date.hasSuffix(" GMT") && date.count == 29, "\(date)")

        try c.send(
            c.request("POST", "/apps/demo/placements/paywall/resolve", body: String(repeating: " ", count: 70_000)))
        let tooLarge = try c.readResponse()
        #expect(lines(tooLarge).first == "HTTP/1.1 413 Payload Too Large")

        try c.send(
            c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user, headers: ["Connection: close"]))
        let last = try c.readResponse()
        #expect(lines(last).last == "Connection: close")
        #expect(last.body == ok.body)
    }

    @Test("a body in pieces or chunked is read whole; over 64 KiB is 413 and the connection goes on")
    func bodies() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let c = try RawHTTPConnection(server.url)
        let body = Data(Self.user.utf8)
        try c.send(
            "POST /apps/demo/placements/paywall/resolve HTTP/1.1\r\nHost: \(c.hostHeader)\r\nContent-Length: \(body.count)\r\n\r\n"
        )
        for piece in stride(from: 0, to: body.count, by: 20) {
            // Time is what is tested: the body arrives in pieces, 30 ms apart, each its own segment.
            usleep(30_000)
            try c.send(body.subdata(in: piece..<min(piece + 20, body.count)))
        }
        #expect(try c.readResponse().json?["placement_key"] as? String == "paywall")

        let half = body.count / 2
        try c.send(
            "POST /apps/demo/placements/onboarding/resolve HTTP/1.1\r\nHost: \(c.hostHeader)\r\nTransfer-Encoding: chunked\r\n\r\n"
                + String(half, radix: 16) + "\r\n" + String(decoding: body.prefix(half), as: UTF8.self) + "\r\n")
        // Time is what is tested: the second chunk comes 30 ms after the first.
        usleep(30_000)
        try c.send(
            String(body.count - half, radix: 16) + "\r\n" + String(decoding: body.dropFirst(half), as: UTF8.self)
                + "\r\n0\r\n\r\n")
        #expect(try c.readResponse().json?["placement_key"] as? String == "onboarding")

        let huge = String(repeating: " ", count: 100_000)
        try c.send(c.request("POST", "/apps/demo/placements/paywall/resolve", body: huge))
        let refused = try c.readResponse()
        #expect(refused.status == 413)
        #expect((refused.json?["error"] as? [String: Any])?["code"] as? String == "too_large")
        try c.send(c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user))
        #expect(try c.readResponse().status == 200)
    }

    @Test("a client that pipelines without reading holds the server back instead of filling its memory")
    func backpressure() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let c = try RawHTTPConnection(server.url, receiveBuffer: 16 * 1024)
        let count = 40_000
        let one = c.request("POST", "/apps/demo/placements/paywall/resolve", body: Self.user)
        var burst = Data(capacity: one.count * count)
        for _ in 0..<count { burst += one }
        var sent = c.sendWhileAccepted(burst, seconds: 3)

        // The server answers what the socket buffers hold (about 1.4 KB each), then
        // stops reading until the client reads.
        func answered() async throws -> Int {
            let stats = try await http(.GET, "\(server.url)/_admin/stats")
            return (stats.json?["routes"] as? [String: Int])?["resolve"] ?? 0
        }
        var last = -1
        var held = try await answered()
        while held != last {
            // Time is what is tested: the server, not reading, answers nothing more over 500 ms.
            try await Task.sleep(for: .milliseconds(500))
            (last, held) = (held, try await answered())
        }
        #expect(held < count / 2, "answered \(held) of \(count) requests nobody read")

        // Reading resumes the flow: every request is answered, in order, and counted once.
        let reader = Task.detached { () throws -> Int in
            var ok = 0
            for _ in 0..<count where try c.readResponse().status == 200 { ok += 1 }
            return ok
        }
        while sent < burst.count { sent += c.sendWhileAccepted(burst.subdata(in: sent..<burst.count), seconds: 1) }
        #expect(try await reader.value == count)
        #expect(try await answered() == count)
    }
}

/// Which request paths the resolve handler answers: the two resolve routes, read
/// as Hummingbird's router reads a path, so that moving the routes out of the
/// router changed no spelling's answer.
@Suite("fpctl serve: the resolve routes, as the router reads paths")
struct ResolveRouteTests {
    @Test(
        "resolve and batch paths are parsed to their app and placement",
        arguments: [
            ("/apps/demo/placements/paywall/resolve", ResolveRoute.single(app: "demo", placement: "paywall")),
            ("/apps/a-b.c_~9/placements/K.e~y-1/resolve", .single(app: "a-b.c_~9", placement: "K.e~y-1")),
            ("/apps/demo/placements/resolve-batch", .batch(app: "demo")),
            // A placement may itself be called resolve-batch or resolve.
            ("/apps/demo/placements/resolve-batch/resolve", .single(app: "demo", placement: "resolve-batch")),
            ("/apps/x/placements/resolve/resolve", .single(app: "x", placement: "resolve")),
            // Empty segments are skipped; nothing is percent-decoded.
            ("//apps//demo/placements/paywall/resolve/", .single(app: "demo", placement: "paywall")),
            ("apps/demo/placements/resolve-batch/", .batch(app: "demo")),
            ("/apps/de%20mo/placements/pay%2Fwall/resolve", .single(app: "de%20mo", placement: "pay%2Fwall")),
            ("/apps/démo/placements/pay wall/resolve", .single(app: "démo", placement: "pay wall")),
        ])
    func parsed(path: String, route: ResolveRoute) {
        #expect(ResolveRoute(path: path[...]) == route)
    }

    @Test(
        "every other path is the router's",
        arguments: [
            "", "/", "/apps/demo/placements/paywall/resolved", "/apps/demo/placement/paywall/resolve",
            "/app/demo/placements/paywall/resolve", "/apps/demo/placements/paywall/resolve/x",
            "/apps/demo/placements/resolve-batc", "/apps/demo/placements", "/APPS/demo/placements/paywall/resolve",
            "/apps/demo/placements/paywall/RESOLVE", "/media/x.png", "/_admin/stats",
        ])
    func refused(path: String) {
        #expect(ResolveRoute(path: path[...]) == nil)
    }

    @Test(
        "a request target's path is what the router matches: up to the query, also in absolute form",
        arguments: [
            ("/apps/demo/placements/paywall/resolve?x=1#y", "/apps/demo/placements/paywall/resolve"),
            ("/apps/demo/placements/resolve-batch", "/apps/demo/placements/resolve-batch"),
            ("http://127.0.0.1:8080/apps/demo/placements/paywall/resolve?q", "/apps/demo/placements/paywall/resolve"),
        ])
    func targetPath(target: String, path: String) {
        #expect(String(ResolveRoute.path(ofTarget: target)) == path)
    }

    @Test("paths made of route-like pieces parse as Hummingbird's own router trie matches them (100,000 of them)")
    func agreesWithRouter() {
        // The two routes as `serve` registered them with the router before they moved out.
        let builder = RouterPathTrieBuilder<String>()
        builder.addEntry("apps/:app/placements/resolve-batch", value: "batch")
        builder.addEntry("apps/:app/placements/:placement/resolve", value: "single")
        let trie = builder.build()
        func plain(_ path: String) -> ResolveRoute? {
            guard let (route, parameters) = trie.resolve(path), let app = parameters.get("app") else { return nil }
            if route == "batch" { return .batch(app: app) }
            return parameters.get("placement").map { .single(app: app, placement: $0) }
        }
        let pieces = [
            "/", "/", "/", "apps", "placements", "resolve", "resolve-batch", "demo", "k", "-", ".", "~", "_", "%2F",
            "é", " ", "?", "A", "9", "//", "/apps/", "/placements/", "/resolve",
        ]
        var random = SystemRandomNumberGenerator()
        var disagreements: [String] = []
        for _ in 0..<100_000 {
            let path = (0..<Int.random(in: 0...9, using: &random)).map { _ in pieces.randomElement(using: &random)! }
                .joined()
            if ResolveRoute(path: path[...]) != plain(path) { disagreements.append(path) }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(5))")
        // The generator does reach the routes, or the test would prove little.
        var reached = 0
        for _ in 0..<20_000 {
            let path =
                "/apps/" + pieces.randomElement(using: &random)! + "/placements/"
                + pieces.randomElement(using: &random)! + "/resolve"
            if plain(path) != nil { reached += 1 }
            #expect(ResolveRoute(path: path[...]) == plain(path), "\(path)")
        }
        #expect(reached > 1_000)
    }
}
