import Foundation
import Testing

/// A format-1 cache written by the fpctl before format 2
/// (`Fixtures/cache-format1`, described in `Fixtures/cache-format1.md`),
/// migrated to format 2: by `cache migrate`, by a kill at each of its steps
/// and a second run, and by `warm`. Every command answers as it did before.
@Suite("cache format 1 to 2", .serialized)
struct CacheMigrationTests {
    static let fixture = Paths.packageRoot.appendingPathComponent("Tests/fpctlTests/Fixtures/cache-format1").path
    /// The fixture's entries were written on 2026-11-27 at about 13:18 UTC.
    static let now = ["FPCTL_NOW": "2026-11-27T13:20:00Z", "FPCTL_API_KEY": "k", "FPCTL_CACHE_FORMAT": "2"]

    /// Every identity the fixture holds, one that it holds only corrupt (zed), and one it never saw.
    static let questions: [(placement: String, user: String, attributes: [String])] = [
        ("paywall", "alice", ["plan=free", "country=US"]), ("onboarding", "alice", ["plan=free", "country=US"]),
        ("paywall", "bob", ["plan=pro"]), ("onboarding", "carol", []), ("paywall", "erin", []),
        ("paywall", "émile ~ /x", []), ("paywall", String(repeating: "u", count: 300), []),
        (String(repeating: "p", count: 200), "dave", []), ("paywall", "zed", []), ("paywall", "nobody", []),
        ("onboarding", "nobody", []),
    ]

    /// A copy of the fixture.
    static func copy(into tmp: TemporaryDirectory, _ name: String) throws -> String {
        let path = tmp.file(name)
        try FileManager.default.copyItem(atPath: fixture, toPath: path)
        return path
    }

    /// What every read-only command says of the cache: each question's
    /// `resolve` (no backend: cache, then stale), `cache list` and `cache
    /// info` in JSON without sizes (format 2 counts a flow's bytes, not its
    /// entry file's), and `cache verify`'s findings without their paths.
    static func answers(_ cache: String) throws -> [String] {
        var out: [String] = []
        for q in questions {
            let resolve = try fpctl(
                ["resolve", q.placement, "--cache-dir", cache, "--user-id", q.user]
                    + q.attributes.flatMap { ["--attribute", $0] }
                    + ["--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--retries", "0"],
                environment: now)
            out.append("resolve \(q.placement.prefix(20)) \(q.user.prefix(20)): \(resolve.status)\n\(resolve.stdout)")
        }
        let list = try fpctl(["cache", "list", "--cache-dir", cache, "--format", "json"], environment: now)
        out.append("list \(list.status): " + withoutSizes(list.stdout))
        let info = try fpctl(["cache", "info", "--cache-dir", cache, "--format", "json"], environment: now)
        out.append("info \(info.status): " + withoutSizes(info.stdout.replacingOccurrences(of: cache, with: "CACHE")))
        let verify = try fpctl(["cache", "verify", "--cache-dir", cache, "--format", "json"], environment: now)
        let findings =
            (try? JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as? [String: Any])?[
                "findings"] as? [[String: Any]]
        out.append("verify \(verify.status): \((findings ?? []).map { "\($0["rule"] ?? "")" }.sorted())")
        return out
    }

    /// JSON with every `size`, `bytes` and `*_bytes` member's value blanked.
    static func withoutSizes(_ json: String) -> String {
        json.replacingOccurrences(
            of: #""(size|bytes|flow_bytes)":[0-9]+"#, with: #""$1":_"#, options: .regularExpression)
    }

    /// Each answer against the reference's, one expectation each, so a failure shows the one that changed.
    static func expectSameAnswers(_ cache: String, _ when: String, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let answers = try answers(cache)
        #expect(answers.count == reference.count, sourceLocation: sourceLocation)
        for (answer, expected) in zip(answers, reference) {
            #expect(answer == expected, "\(when)", sourceLocation: sourceLocation)
        }
    }

    static let reference: [String] = {
        let tmp = try? TemporaryDirectory()
        guard let tmp, let cache = try? copy(into: tmp, "reference") else { return [] }
        return (try? answers(cache)) ?? []
    }()

    @Test("the fixture reads as format 1, and the questions ask what it holds")
    func fixtureIsFormatOne() throws {
        let marker = try String(contentsOfFile: Self.fixture + "/fpcache.json", encoding: .utf8)
        #expect(marker.contains(#""version": 1"#))
        #expect(Self.reference.count == Self.questions.count + 3)
        // alice's paywall is fresh in the cache; zed's entry is corrupt, a miss served from the alias.
        #expect(Self.reference[0].contains("tier 0 cache: hit, fresh"))
        #expect(Self.reference[8].contains("tier 2 stale cache: served the last-known-good flow"))
        #expect(Self.reference.last?.contains("cache-corrupt-entry") == true)
    }

    @Test("cache migrate moves every entry to format 2; every command answers as before")
    func migrateAnswersAsBefore() throws {
        let tmp = try TemporaryDirectory()
        let cache = try Self.copy(into: tmp, "cache")
        let migrate = try fpctl(["cache", "migrate", "--cache-dir", cache], environment: Self.now)
        #expect(migrate.status == 0, "\(migrate.stderr)")
        #expect(migrate.stderr.contains("10 entries, 3 aliases, 2 distinct flows stored once, 1 unreadable"))
        let marker = try String(contentsOfFile: cache + "/fpcache.json", encoding: .utf8)
        #expect(marker.contains(#""version": 2"#))
        let names = try FileManager.default.contentsOfDirectory(atPath: cache).sorted()
        #expect(names == [".lock", "fpcache.json", "images", "log", "objects"])
        try Self.expectSameAnswers(cache, "after cache migrate")
        // Once more: nothing to do.
        let again = try fpctl(["cache", "migrate", "--cache-dir", cache], environment: Self.now)
        #expect(again.status == 0 && again.stderr.contains("is cache format 2 already"))
    }

    @Test(
        "a migration killed at any step leaves the old answers, and the next one finishes",
        arguments: ["migrate-objects", "migrate-written", "migrate-switched"])
    func killedMigration(step: String) throws {
        let tmp = try TemporaryDirectory()
        let cache = try Self.copy(into: tmp, "cache")
        var environment = Self.now
        environment["FPCTL_FAULT"] = step
        let killed = try fpctl(["cache", "migrate", "--cache-dir", cache], environment: environment)
        #expect(killed.status == SIGKILL, "the fault point \(step) was reached: \(killed.stderr)")
        let marker = try String(contentsOfFile: cache + "/fpcache.json", encoding: .utf8)
        #expect(marker.contains(step == "migrate-switched" ? #""version": 2"# : #""version": 1"#))
        try Self.expectSameAnswers(cache, "after a kill at \(step)")
        let finished = try fpctl(["cache", "migrate", "--cache-dir", cache], environment: Self.now)
        #expect(finished.status == 0, "\(finished.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: cache).sorted()
        #expect(names == [".lock", "fpcache.json", "images", "log", "objects"])
        try Self.expectSameAnswers(cache, "after the second run")
    }

    @Test("warm migrates a format-1 cache before it writes, and the old entries answer beside the new")
    func warmMigrates() throws {
        let tmp = try TemporaryDirectory()
        let cache = try Self.copy(into: tmp, "cache")
        let server = try ServeProcess([Paths.sample("demo")])
        let ids = try tmp.identities(20)
        let warm = try fpctl(
            [
                "warm", "onboarding", "paywall", "--cache-dir", cache, "--api-url", server.url, "--app-id", "demo",
                "--identities", ids, "--media", "none",
            ], environment: Self.now)
        #expect(warm.status == 0, "\(warm.stderr)")
        let marker = try String(contentsOfFile: cache + "/fpcache.json", encoding: .utf8)
        #expect(marker.contains(#""version": 2"#))
        #expect(!FileManager.default.fileExists(atPath: cache + "/flows"))
        let info = try fpctl(["cache", "info", "--cache-dir", cache, "--format", "json"], environment: Self.now)
        #expect(info.stdout.contains(#""flows":51"#), "11 migrated and 40 warmed: \(info.stdout)")
        let erin = try fpctl(
            [
                "resolve", "paywall", "--cache-dir", cache, "--user-id", "erin", "--api-url", "http://127.0.0.1:9",
                "--app-id", "demo", "--retries", "0",
            ], environment: Self.now)
        #expect(erin.stdout.contains("tier 0 cache: entry is stale (age 620400s"), "\(erin.stdout)")
    }
}
