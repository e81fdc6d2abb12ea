import AsyncHTTPClient
import FlowPilotCore
import Foundation
import Testing

@Suite("fpctl serve over real HTTP on loopback")
struct ServeTests {
    @Test(
        "a --host that is no address is a usage error (64), one that cannot be bound fails (1); one line, before 'serving'"
    )
    func badHost() throws {
        for host in ["999.1.1.1", "256.0.0.1", "no-such-host.invalid"] {
            let r = try run(Paths.fpctl, ["serve", Paths.sample("demo"), "--host", host, "--port", "0"], timeout: 60)
            #expect(r.status == 64 && r.stdout.isEmpty, "\(host): \(r.status) \(r.stdout)")
            #expect(!r.stderr.contains("serving app"), "\(host): said it was serving: \(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(
                lines.count == 1 && lines[0].hasPrefix("fpctl: error: --host \(host): not an IP address or a name"),
                "\(r.stderr)")
        }
        // An address, but not this machine's (TEST-NET-1, RFC 5737): it cannot be bound.
        let foreign = try run(
            Paths.fpctl, ["serve", Paths.sample("demo"), "--host", "192.0.2.1", "--port", "0"], timeout: 60)
        #expect(foreign.status == 1 && foreign.stdout.isEmpty, "\(foreign.status) \(foreign.stderr)")
        #expect(foreign.stderr.hasPrefix("fpctl: error: cannot serve on 192.0.2.1:0"), "\(foreign.stderr)")
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        #expect(server.url.hasPrefix("http://127.0.0.1:"))
        #expect(server.stderr.contains("serving app demo: onboarding, paywall"))
    }

    @Test("resolve answers the bundled flow; cache_ttl_seconds only with --ttl")
    func resolveOne() async throws {
        let plain = try ServeProcess([Paths.sample("demo"), "-q"])
        let r = try await resolve(plain, "paywall")
        #expect(r.status == 200)
        #expect(r.json?["placement_key"] as? String == "paywall")
        #expect(flowID(r) == "flow_paywall")
        #expect(r.json?["cache_ttl_seconds"] == nil)
        let withTTL = try ServeProcess([Paths.sample("demo"), "-q", "--ttl", "300"])
        #expect(try await resolve(withTTL, "paywall").json?["cache_ttl_seconds"] as? Int == 300)
    }

    @Test("resolve-batch answers every key, with a per-key error for an unknown one")
    func batch() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let r = try await http(
            .POST, "\(server.url)/apps/demo/placements/resolve-batch",
            json: ["user_id": "u1", "attributes": [:], "placement_keys": ["onboarding", "paywall", "nope"]])
        #expect(r.status == 200)
        let results = try #require(r.json?["results"] as? [[String: Any]])
        #expect(results.map { $0["placement_key"] as? String } == ["onboarding", "paywall", "nope"])
        #expect((results[0]["flow"] as? [String: Any])?["id"] as? String == "flow_onboarding")
        #expect((results[2]["error"] as? [String: Any])?["code"] as? String == "unknown_placement")
    }

    @Test("bad requests get 4xx JSON errors and the server keeps serving")
    func badRequests() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let unknownApp = try await resolve(server, app: "nope", "paywall")
        #expect(
            unknownApp.status == 404
                && (unknownApp.json?["error"] as? [String: Any])?["code"] as? String == "unknown_app")
        let unknownPlacement = try await resolve(server, "nope")
        #expect(
            unknownPlacement.status == 404
                && (unknownPlacement.json?["error"] as? [String: Any])?["code"] as? String == "unknown_placement")
        let malformed = try await http(
            .POST, "\(server.url)/apps/demo/placements/paywall/resolve", body: Data("{nope".utf8))
        #expect(malformed.status == 400 && malformed.text.contains("invalid_request"))
        let noUser = try await http(
            .POST, "\(server.url)/apps/demo/placements/paywall/resolve", json: ["attributes": [:]])
        #expect(noUser.status == 400)
        let huge = try await http(
            .POST, "\(server.url)/apps/demo/placements/paywall/resolve", body: Data(repeating: 0x20, count: 200_000))
        #expect(huge.status == 413)
        #expect(try await resolve(server, "paywall").status == 200)
    }

    @Test("with an API key, a missing or wrong bearer token is 401 and says nothing about the key")
    func apiKey() async throws {
        let tmp = try TemporaryDirectory()
        try "fp_test_s3cret\n".write(toFile: tmp.file("key"), atomically: true, encoding: .utf8)
        let server = try ServeProcess([Paths.sample("demo"), "--api-key-file", tmp.file("key")])
        for headers in [[], [("Authorization", "Bearer wrong")], [("Authorization", "fp_test_s3cret")]] {
            let r = try await resolve(server, "paywall", headers: headers)
            #expect(r.status == 401)
            #expect(!r.text.contains("s3cret"))
        }
        #expect(
            try await resolve(server, "paywall", headers: [("Authorization", "Bearer fp_test_s3cret")]).status == 200)
        #expect(!server.stderr.contains("s3cret"))
    }

    @Test("targeting: audiences pick flows, experiment variants are sticky per identity and differ across identities")
    func targeting() async throws {
        let server = try ServeProcess([Paths.sample("travel"), "-q"])
        let pro = try await resolve(server, app: "travel", "trip-upsell", attributes: ["plan": "pro"])
        #expect(pro.status == 200 && pro.json?["flow"] is NSNull)
        let elsewhere = try await resolve(server, app: "travel", "trip-upsell", attributes: ["country": "US"])
        #expect(flowID(elsewhere) == "flow_trip_upsell")
        var seen = Set<String>()
        for i in 0..<16 {
            let first = try await resolve(
                server, app: "travel", "trip-upsell", user: "user\(i)", attributes: ["country": "DE"])
            let again = try await resolve(
                server, app: "travel", "trip-upsell", user: "user\(i)", attributes: ["country": "DE"])
            #expect(flowID(first) == flowID(again), "user\(i) changed variant")
            seen.insert(flowID(first) ?? "none")
        }
        #expect(seen == ["flow_trip_upsell", "flow_trip_upsell_b"])
    }

    @Test("every fault, set at run time through the admin route, then reset")
    func faults() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        func setFaults(_ faults: [String: Any]) async throws {
            #expect(try await http(.POST, "\(server.url)/_admin/faults", json: faults).status == 200)
        }
        try await setFaults(["fail_rate": 1, "fail_status": 503])
        #expect(try await resolve(server, "paywall").status == 503)
        try await setFaults(["fail_rate": 1, "fail_status": 429, "retry_after": 2])
        let limited = try await resolve(server, "paywall")
        #expect(limited.status == 429 && limited.headers["Retry-After"].first == "2")
        try await setFaults(["batch_disabled": true])
        let batch = try await http(
            .POST, "\(server.url)/apps/demo/placements/resolve-batch",
            json: ["user_id": "u", "placement_keys": ["paywall"]])
        #expect(batch.status == 404)
        try await setFaults(["truncate_body": true])
        let truncated = try await resolve(server, "paywall")
        #expect(truncated.status == 200 && truncated.json == nil && truncated.text.hasPrefix("{"))
        try await setFaults(["invalid_json": true])
        let invalid = try await resolve(server, "paywall")
        #expect(invalid.status == 200 && invalid.json == nil)
        try await setFaults(["close_connection": true])
        await #expect(throws: (any Error).self) { _ = try await resolve(server, "paywall") }
        try await setFaults(["no_flow": ["paywall"]])
        #expect(try await resolve(server, "paywall").json?["flow"] is NSNull)
        #expect(flowID(try await resolve(server, "onboarding")) == "flow_onboarding")
        try await setFaults(["fail_rate": 1, "placements": ["onboarding"]])
        #expect(try await resolve(server, "paywall").status == 200)
        #expect(try await resolve(server, "onboarding").status == 503)
        try await setFaults(["latency_ms": [300]])
        let start = ContinuousClock.now
        #expect(try await resolve(server, "paywall").status == 200)
        #expect(ContinuousClock.now - start >= .milliseconds(300))
        #expect(try await http(.POST, "\(server.url)/_admin/faults", json: ["fail_rate": 7]).status == 400)
        #expect(try await http(.DELETE, "\(server.url)/_admin/faults").status == 204)
        #expect(flowID(try await resolve(server, "paywall")) == "flow_paywall")
    }

    @Test("fault flags at start: --fail-rate and --no-batch")
    func faultFlags() async throws {
        let server = try ServeProcess([
            Paths.sample("demo"), "-q", "--fail-rate", "1", "--fail-status", "502", "--no-batch",
        ])
        #expect(try await resolve(server, "paywall").status == 502)
        #expect(
            try await http(
                .POST, "\(server.url)/apps/demo/placements/resolve-batch",
                json: ["user_id": "u", "placement_keys": ["paywall"]]
            ).status == 404)
    }

    @Test("stats count requests per route and per (app, placement, user)")
    func stats() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        for _ in 0..<3 { _ = try await resolve(server, "paywall", user: "alice") }
        _ = try await resolve(server, "onboarding", user: "bob")
        _ = try await http(
            .POST, "\(server.url)/apps/demo/placements/resolve-batch",
            json: ["user_id": "bob", "placement_keys": ["paywall", "onboarding"]])
        let stats = try #require(try await http(.GET, "\(server.url)/_admin/stats").json)
        let keys = try #require(stats["keys"] as? [String: Int])
        #expect(keys == ["demo/paywall/alice": 3, "demo/onboarding/bob": 2, "demo/paywall/bob": 1])
        let routes = try #require(stats["routes"] as? [String: Int])
        #expect(routes["resolve"] == 4 && routes["resolve-batch"] == 1)
        #expect(try await http(.DELETE, "\(server.url)/_admin/stats").status == 204)
        #expect((try await http(.GET, "\(server.url)/_admin/stats").json?["total"] as? Int) == 0)
    }

    @Test("--rewrite-asset-urls: every image and font URL of a flow fetches its bytes from the server")
    func rewrittenMedia() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let r = try await resolve(server, "onboarding")
        let (doc, findings) = FlowDocument.validate(
            data: try JSONSerialization.data(withJSONObject: r.json!["flow"]!), location: "served")
        #expect(findings.isEmpty, "\(findings.map(\.line))")
        let flow = try #require(doc)
        #expect(flow.allImages.count == 4 && flow.fonts.count == 1)
        for url in flow.allImages + flow.fonts.map(\.url) {
            #expect(url.hasPrefix(server.url))
            let asset = try await http(.GET, url)
            #expect(asset.status == 200)
            let name = URL(string: url)!.lastPathComponent
            #expect(Digest.sha256Hex(asset.body) == String(name.prefix(64)), "\(url) bytes do not match their name")
            let etag = try #require(asset.headers["ETag"].first)
            #expect(try await http(.GET, url, headers: [("If-None-Match", etag)]).status == 304)
        }
        #expect(flow.fonts[0].sha256 == String(URL(string: flow.fonts[0].url)!.lastPathComponent.prefix(64)))
    }

    @Test("curl drives it as a shell script would")
    func curl() throws {
        let server = try ServeProcess([Paths.sample("demo"), Paths.sample("travel"), "-q"])
        let r = try run(
            try tool("curl"),
            [
                "-sS", "-f", "-X", "POST", "-H", "Content-Type: application/json",
                "-d", #"{"user_id":"u1","attributes":{"country":"US"}}"#,
                "\(server.url)/apps/travel/placements/welcome/resolve",
            ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains(#""id":"flow_travel_welcome""#))
        let missing = try run(
            try tool("curl"), ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(server.url)/media/none.png"])
        #expect(missing.stdout == "404")
    }

    @Test("one request log line per request on stderr; none with -q")
    func requestLog() async throws {
        let server = try ServeProcess([Paths.sample("demo")])
        _ = try await resolve(server, "paywall")
        _ = try await resolve(server, "nope")
        #expect(server.stop() == 0)
        let lines = server.stderr.split(separator: "\n").filter { $0.hasPrefix("POST ") }
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("POST /apps/demo/placements/paywall/resolve 200 "))
        #expect(lines[1].hasPrefix("POST /apps/demo/placements/nope/resolve 404 "))
    }

    @Test("SIGINT and SIGTERM shut it down cleanly", arguments: [SIGINT, SIGTERM])
    func shutdown(signal: Int32) async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        #expect(try await resolve(server, "paywall").status == 200)
        #expect(server.stop(signal: signal) == 0)
    }

    @Test("bad content refuses to start with the validator's findings")
    func refusesBadContent() throws {
        let tmp = try TemporaryDirectory()
        try Data("not a zip".utf8).write(to: URL(fileURLWithPath: tmp.file("bad.fpbundle")))
        let bad = try fpctl("serve", tmp.file("bad.fpbundle"), "--port", "0")
        #expect(bad.status == 65)
        #expect(bad.stderr.contains("not-zip"))
        #expect(bad.stdout.isEmpty)
        #expect(try fpctl("serve", tmp.file("absent"), "--port", "0").status == 66)

        try FileManager.default.copyItem(atPath: Paths.sample("travel"), toPath: tmp.file("travel"))
        try #"{"placements":{"trip-upsell":[{"flow":"no-such-placement"}]}}"#.write(
            toFile: tmp.file("travel/rules.json"), atomically: true, encoding: .utf8)
        let badRules = try fpctl("serve", tmp.file("travel"), "--port", "0")
        #expect(badRules.status == 65)
        #expect(badRules.stderr.contains("rules-invalid"))
    }

    @Test(
        "every rules.json mistake is a finding at load, naming its path; serve refuses to start with 65",
        arguments: [
            (
                #"[{"experiment":{"id":"e","variants":[{"name":"a","weight":0.5,"flow":"trip-upsell"}]}}]"#,
                "#/placements/trip-upsell/0/experiment/variants/0/weight"
            ),
            (
                #"[{"experiment":{"id":"e","variants":[{"name":"a","weight":0,"flow":"trip-upsell"}]}}]"#,
                "#/placements/trip-upsell/0/experiment/variants/0/weight"
            ),
            (
                #"[{"experiment":{"id":"e","variants":[{"name":"a","weight":1,"flow":"missing"}]}}]"#,
                "#/placements/trip-upsell/0/experiment/variants/0/flow"
            ),
            (#"[{"experiment":{"id":"e","variants":[]}}]"#, "#/placements/trip-upsell/0/experiment"),
            (
                #"[{"audience":{"plan":{"like":"pro"}},"flow":"trip-upsell"}]"#,
                "#/placements/trip-upsell/0/audience/plan"
            ),
            (#"[{"flow":"no-such-placement"}]"#, "#/placements/trip-upsell/0/flow"),
            // An audience that is not an object used to match everyone.
            (#"[{"audience":"pro","flow":null},{"flow":"trip-upsell"}]"#, "#/placements/trip-upsell/0/audience"),
        ])
    func rulesMistakes(candidates: String, pointer: String) throws {
        let tmp = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("travel"), toPath: tmp.file("travel"))
        try #"{"placements":{"trip-upsell":\#(candidates)}}"#.write(
            toFile: tmp.file("travel/rules.json"), atomically: true, encoding: .utf8)
        let refused = try fpctl("serve", tmp.file("travel"), "--port", "0")
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("rules-invalid: \(tmp.file("travel/rules.json"))\(pointer): "), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty, "it never started")
    }
}
