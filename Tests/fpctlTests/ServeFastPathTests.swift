import Foundation
import Testing

@testable import FlowPilotServer

/// `fpctl serve` answers plain resolve requests on the event loop and passes the
/// rest to Hummingbird's router (docs/serve.md, "Performance"). A client must not
/// be able to tell the two apart: same bytes, same order, same counts.
@Suite("fpctl serve: the event-loop resolve path and the router agree")
struct ServeFastPathTests {
    static let user = #"{"user_id":"u1","attributes":{"plan":"free","country":"DE"}}"#

    @Test("pipelined requests are answered in order, whichever path answers each")
    func pipelining() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let c = try RawHTTPConnection(server.url)
        // Admin route (router), plain resolve (event loop), a trailing slash (router),
        // a batch (event loop) and the stats (router), all in one write.
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

    /// The same request three ways: plain (event loop), with a trailing slash and
    /// with `Connection: close` (both router).
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
        return try [plain.readResponse(), slash.readResponse(), closing.readResponse()]
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

    @Test("same status, headers and bytes from both paths", arguments: cases)
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
            // Rewritten asset URLs name the address the client used, on both paths.
            #expect(answers[0].text.contains("http://\(try RawHTTPConnection(server.url).hostHeader)/media/"))
        }
    }

    @Test("rewritten answers are encoded once per Host, name that Host, and stay what the router answers")
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

    @Test("targeting and every body fault give the same answer on both paths")
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

    @Test("a body in pieces or chunked is read whole; over 64 KiB is 413 and the connection goes on")
    func bodies() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let c = try RawHTTPConnection(server.url)
        let body = Data(Self.user.utf8)
        try c.send(
            "POST /apps/demo/placements/paywall/resolve HTTP/1.1\r\nHost: \(c.hostHeader)\r\nContent-Length: \(body.count)\r\n\r\n"
        )
        for piece in stride(from: 0, to: body.count, by: 20) {
            usleep(30_000)
            try c.send(body.subdata(in: piece..<min(piece + 20, body.count)))
        }
        #expect(try c.readResponse().json?["placement_key"] as? String == "paywall")

        let half = body.count / 2
        try c.send(
            "POST /apps/demo/placements/onboarding/resolve HTTP/1.1\r\nHost: \(c.hostHeader)\r\nTransfer-Encoding: chunked\r\n\r\n"
                + String(half, radix: 16) + "\r\n" + String(decoding: body.prefix(half), as: UTF8.self) + "\r\n")
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

/// Which request paths the event-loop path answers itself: the plain spellings
/// of the two resolve routes, nothing else (the router takes the rest, and
/// `sameAnswers` shows a client cannot tell the difference).
@Suite("fpctl serve: the resolve routes the event-loop path recognises")
struct ResolveRouteTests {
    @Test(
        "plain resolve and batch paths are parsed to their app and placement",
        arguments: [
            ("/apps/demo/placements/paywall/resolve", ResolveRoute.single(app: "demo", placement: "paywall")),
            ("/apps/a-b.c_~9/placements/K.e~y-1/resolve", .single(app: "a-b.c_~9", placement: "K.e~y-1")),
            ("/apps/demo/placements/resolve-batch", .batch(app: "demo")),
            // A placement may itself be called resolve-batch or resolve.
            ("/apps/demo/placements/resolve-batch/resolve", .single(app: "demo", placement: "resolve-batch")),
            ("/apps/x/placements/resolve/resolve", .single(app: "x", placement: "resolve")),
        ])
    func parsed(path: String, route: ResolveRoute) {
        #expect(ResolveRoute(path: path[...]) == route)
    }

    @Test(
        "every other spelling is left to the router",
        arguments: [
            "", "/", "apps/demo/placements/paywall/resolve", "/apps/demo/placements/paywall/resolve/",
            "//apps/demo/placements/paywall/resolve", "/apps//placements/paywall/resolve",
            "/apps/demo/placements//resolve", "/apps/demo/placements/paywall/resolved",
            "/apps/demo/placement/paywall/resolve", "/app/demo/placements/paywall/resolve",
            "/apps/demo/placements/paywall/resolve/x", "/apps/demo/placements/resolve-batch/",
            "/apps/demo/placements/resolve-batc", "/apps/demo/placements", "/apps/de%20mo/placements/paywall/resolve",
            "/apps/démo/placements/paywall/resolve", "/apps/demo/placements/pay wall/resolve",
            "/apps/demo/placements/paywall/resolve?x=1", "/APPS/demo/placements/paywall/resolve",
        ])
    func refused(path: String) {
        #expect(ResolveRoute(path: path[...]) == nil)
    }

    @Test("paths made of route-like pieces parse as the rules read plainly say (100,000 of them)")
    func agreesWithPlainReading() {
        // The rules, read as plainly as possible: split on "/", check each part.
        func plain(_ path: String) -> ResolveRoute? {
            let unreserved = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
            guard path.hasPrefix("/") else { return nil }
            let parts = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(unreserved.contains) }),
                parts.count == 4 || parts.count == 5, parts[0] == "apps", parts[2] == "placements"
            else { return nil }
            if parts.count == 4 { return parts[3] == "resolve-batch" ? .batch(app: parts[1]) : nil }
            return parts[4] == "resolve" ? .single(app: parts[1], placement: parts[3]) : nil
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
