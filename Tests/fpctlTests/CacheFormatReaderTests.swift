import Foundation
import Testing

/// docs/cache-format.md says a reader can be written from the page alone:
/// `Tests/format2/fpcache2.py` was, and it must read what fpctl writes in
/// format 2 as `cache list` does (every key's newest entry, whole), find the
/// torn record a killed writer leaves, and agree on the key an index sorts by.
@Suite("cache format 2 read by a reader written from its page")
struct CacheFormatReaderTests {
    static let reader = Paths.packageRoot.appendingPathComponent("Tests/format2/fpcache2.py").path

    static func readerLines(_ cache: String) throws -> [[String: Any]] {
        let out = try run("/usr/bin/python3", [reader, cache])
        #expect(out.status == 0, "\(out.stderr)")
        return out.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test("the page's reader finds every entry cache list shows, each whole, and flags a torn tail")
    func readsWhatFpctlWrites() throws {
        let tmp = try TemporaryDirectory()
        let cache = tmp.file("cache")
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let long = String(repeating: "ü", count: 400)
        let lines = (0..<300).map { i in
            #"{"placement":"\#(i % 3 == 0 ? "onboarding" : "paywall")","user_id":"\#(i == 7 ? long : "u\(i)")","ttl_seconds":\#(60 + i),"flow_file":"\#(flow)"}"#
        }
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: tmp.file("in.jsonl"), atomically: true, encoding: .utf8)
        let put = try fpctl(
            ["cache", "put", "--cache-dir", cache, "--input", tmp.file("in.jsonl")],
            environment: ["FPCTL_CACHE_FORMAT": "2"])
        #expect(put.status == 0, "\(put.stderr)")
        // Ages as of one pinned moment, so two listings minutes apart on a slow machine compare equal.
        let now = ["FPCTL_NOW": ISO8601DateFormatter().string(from: Date())]
        let list = try fpctl(["cache", "list", "--cache-dir", cache, "--format", "json"], environment: now)
        let rows = try #require(
            (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])?["rows"]
                as? [[String: Any]])
        let read = try Self.readerLines(cache)
        let entries = read.filter { $0["placement"] != nil }
        #expect(rows.count == 300 && entries.count == 300)
        #expect(
            entries.allSatisfy { $0["problem"] is NSNull },
            "every entry whole: \(entries.filter { !($0["problem"] is NSNull) }.prefix(3))")
        let listed = Set(
            rows.map { "\($0["placement"]!)/\($0["fingerprint"]!)/\($0["ttl_seconds"]!)/\($0["user_id"]!)" })
        let found = Set(
            entries.map { "\($0["placement"]!)/\($0["fingerprint"]!)/\($0["ttl_seconds"]!)/\($0["user_id"]!)" })
        #expect(listed == found)
        #expect(found.contains { $0.hasSuffix("/" + long) }, "a long user id kept whole")
        #expect(read.filter { $0["alias"] != nil }.count == 2)
        #expect(!read.contains { $0["problem"] is String && $0["placement"] == nil })
        // A writer killed mid-append: a torn last record, which both readers stop at.
        let log = cache + "/log"
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: log).first { $0.hasSuffix(".seg") })
        let handle = try #require(FileHandle(forWritingAtPath: "\(log)/\(segment)"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([120, 0, 0, 0, 1, 2, 3, 4, 1, 1]))
        try handle.close()
        let torn = try Self.readerLines(cache)
        #expect(torn.contains { ($0["problem"] as? String)?.contains("torn record") == true })
        let verify = try fpctl("cache", "verify", "--cache-dir", cache)
        // Debris of a killed writer, as its temporary file would be; --repair drops it.
        #expect(verify.status == 65 && verify.stdout.contains("cache-temp-debris: log/"), "\(verify.stdout)")
        #expect(try fpctl("cache", "verify", "--cache-dir", cache, "--repair").status == 65)
        #expect(try fpctl("cache", "verify", "--cache-dir", cache).stdout == "ok\n")
        let again = try fpctl(["cache", "list", "--cache-dir", cache, "--format", "json"], environment: now)
        #expect(again.stdout == list.stdout, "what the torn tail's repair left is what was listed before")
    }
}
