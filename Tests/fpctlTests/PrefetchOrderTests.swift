import Foundation
import Testing

/// Prefetch as the SDK's seed describes it: every key at once, each with the
/// same resolveTimeout from the start. A fresh cache hit's images are
/// downloaded beside the live placements' requests, never before them.
@Suite("prefetch runs its placements at once")
struct PrefetchOrderTests {
    @Test("a cached placement whose images never arrive does not hold back a live placement's request")
    func cachedImagesDoNotDelayLive() throws {
        let tmp = try TemporaryDirectory()
        // The image host accepts connections and never answers.
        let host = try PeerProcess(["127.0.0.1", "0"])
        defer { host.stop() }
        let port = host.port

        // onboarding is fresh in the cache for u-1, its images on the silent host.
        let demo = try String(contentsOfFile: Paths.sample("demo") + "/flows/onboarding.json", encoding: .utf8)
        var flow = try #require(try JSONSerialization.jsonObject(with: Data(demo.utf8)) as? [String: Any])
        flow["content_hash"] = nil
        let silent = String(
            decoding: try JSONSerialization.data(withJSONObject: flow), as: UTF8.self
        ).replacingOccurrences(of: #"https:\/\/cdn.example.com"#, with: #"http:\/\/127.0.0.1:\#(port)"#)
        #expect(silent.contains("127.0.0.1:\(port)"))
        try silent.write(toFile: tmp.file("onboarding.json"), atomically: true, encoding: .utf8)
        try
            #"{"placement":"onboarding","user_id":"u-1","ttl_seconds":3600,"flow_file":"\#(tmp.file("onboarding.json"))"}"#
            .write(toFile: tmp.file("put.jsonl"), atomically: true, encoding: .utf8)
        let cache = tmp.file("cache")
        #expect(try fpctl("cache", "put", "--cache-dir", cache, "--input", tmp.file("put.jsonl")).status == 0)

        // paywall is live, from a backend that answers at once.
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let warm = try fpctl(
            "warm", "onboarding", "paywall", "--user-id", "u-1", "--cache-dir", cache, "--api-url", server.url,
            "--app-id", "demo", "--media", "all-screens", "--timeout", "5s", "--grace", "2s", "--format", "json")
        let document = try JSONSerialization.jsonObject(with: Data(warm.stdout.utf8)) as? [String: Any]
        let rows = try #require(document?["rows"] as? [[String: Any]], "\(warm.stdout) \(warm.stderr)")
        let byPlacement = Dictionary(uniqueKeysWithValues: rows.map { ($0["placement"] as? String ?? "", $0) })
        let paywall = try #require(byPlacement["paywall"])
        #expect(
            paywall["state"] as? String == "warmed", "the live placement waited for the cached one's images: \(paywall)"
        )
        #expect(paywall["delivery_source"] as? String == "network")
        let onboarding = try #require(byPlacement["onboarding"])
        #expect(onboarding["from_cache"] as? Bool == true)
        #expect(onboarding["media_warmed"] as? Bool == false)
    }
}
