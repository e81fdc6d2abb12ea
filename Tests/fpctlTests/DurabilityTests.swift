import Foundation
import Testing

/// What reaches the kernel, in order, for every command that publishes files:
/// the bytes synced before the name appears, the directory synced after, and
/// only then the line that reports it (docs/cache-format.md, "Writing").
@Suite("outputs and cache entries are synced before fpctl reports them (strace)")
struct DurabilityTests {
    let tmp: TemporaryDirectory

    init() throws { tmp = try TemporaryDirectory() }

    @Test("bundle build: the bundle's bytes, then its name, then its directory, then the digest line")
    func bundleBuild() throws {
        let output = tmp.file("demo.fpbundle")
        let trace = try SyscallTrace(["bundle", "build", Paths.sample("demo"), "-o", output], in: tmp)
        #expect(trace.result.status == 0, "\(trace.result.stderr)")
        #expect(!trace.events.isEmpty, "strace saw nothing: \(trace.traceHead)")
        #expect(trace.unsyncedPublishes(under: tmp.path) == [])
        let published = try #require(trace.publishes(under: output).last)
        let reported = try #require(trace.firstOutput(containing: "demo.fpbundle"))
        let directorySynced = try #require(trace.directorySync(of: output, after: published.index))
        #expect(directorySynced < reported)
    }

    @Test("bundle extract: every file and directory synced before the move, the target after it")
    func bundleExtract() throws {
        let bundle = try tmp.buildSample("demo")
        let target = tmp.file("out")
        let trace = try SyscallTrace(["bundle", "extract", bundle, "--output", target], in: tmp)
        #expect(trace.result.status == 0, "\(trace.result.stderr)")
        #expect(!trace.events.isEmpty, "strace saw nothing: \(trace.traceHead)")
        #expect(trace.publishes(under: target).count >= 3)
        #expect(trace.unsyncedPublishes(under: target) == [])
    }

    @Test("bundle pull: every file of the source synced, and every directory it made, before it says so")
    func bundlePull() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let source = tmp.file("pulled/src")
        let trace = try SyscallTrace(
            ["bundle", "pull", "paywall", "onboarding", "-o", source, "--api-url", server.url, "--app-id", "demo"],
            in: tmp)
        #expect(trace.result.status == 0, "\(trace.result.stderr)")
        let published = trace.publishes(under: source)
        #expect(published.count >= 5, "bundle.json, two flows and their media")
        #expect(trace.unsyncedPublishes(under: source) == [])
        // The folders pull made are in their parents for good: each parent synced after.
        for made in [tmp.file("pulled"), source, source + "/flows", source + "/assets"] {
            let parent = (made as NSString).deletingLastPathComponent
            let synced = trace.events.contains {
                if case .sync(_, let path) = $0 { return path == parent }
                return false
            }
            #expect(synced, "\(made) was not synced into its parent")
        }
    }

    /// The two ways a group commit makes entries durable: `syncfs` where the
    /// file system honours it (the tests' ext4 or tmpfs), one fsync per file and
    /// directory elsewhere (`FPCTL_COMMIT=fsync` takes that path here).
    static let commits: [[String: String]] = [[:], ["FPCTL_COMMIT": "fsync"]]
    // The first cache tests here follow format 1's files, each published on its own; format 2's
    // records follow (and the power-cut campaigns, Tests/powercut, cut the power between them).

    @Test(
        "cache put: every entry and the alias synced with its directory before 'wrote N entries', for 5 lines and for 200",
        arguments: commits)
    func cachePut(environment: [String: String]) throws {
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let input = tmp.file("in.jsonl")
        try (0..<5).map {
            #"{"placement":"paywall","user_id":"u\#($0)","attributes":{},"ttl_seconds":300,"flow_file":"\#(flow)"}"#
        }.joined(separator: "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let cache = tmp.file("cache")
        let trace = try SyscallTrace(
            ["cache", "put", "--cache-dir", cache, "--input", input], in: tmp, environment: environment.formatOne)
        #expect(trace.result.status == 0, "\(trace.result.stderr)")
        #expect(!trace.events.isEmpty, "strace saw nothing: \(trace.traceHead)")
        let entries = trace.publishes(under: cache + "/flows/")
        #expect(entries.count == 5)
        // One alias per placement, pointed at the last line's entry once the entries are durable.
        let aliases = trace.publishes(under: cache + "/aliases/")
        #expect(aliases.count == 1)
        #expect(trace.unsyncedPublishes(under: cache) == [])
        let reported = try #require(trace.firstOutput(containing: "wrote 5 entries"))
        for entry in entries + aliases {
            #expect((trace.directorySync(of: entry.target, after: entry.index) ?? .max) < reported)
        }
        #expect(environment.isEmpty ? trace.fileSystemSyncs > 0 : trace.fileSystemSyncs == 0)

        // Many lines, staged while earlier ones commit.
        try (0..<200).map {
            #"{"placement":"paywall","user_id":"m\#($0)","attributes":{},"ttl_seconds":300,"flow_file":"\#(flow)"}"#
        }.joined(separator: "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let many = try SyscallTrace(
            ["cache", "put", "--cache-dir", cache, "--input", input], in: tmp, environment: environment.formatOne)
        #expect(many.result.status == 0, "\(many.result.stderr)")
        #expect(many.unsyncedPublishes(under: cache) == [])
        #expect(many.publishes(under: cache + "/flows/").count == 200)
    }

    @Test(
        "warm: each identity's entries are synced before its row is printed; the metrics file before the run ends",
        arguments: commits)
    func warm(environment: [String: String]) throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let ids = tmp.file("ids.jsonl")
        try (0..<6).map { #"{"user_id":"user-\#($0)"}"# }.joined(separator: "\n").write(
            toFile: ids, atomically: true, encoding: .utf8)
        let cache = tmp.file("cache")
        let metrics = tmp.file("warm.prom")
        let trace = try SyscallTrace(
            [
                "warm", "onboarding", "paywall", "--cache-dir", cache, "--api-url", server.url, "--app-id", "demo",
                "--identities", ids, "--format", "json", "--metrics-file", metrics,
            ], in: tmp, environment: environment.formatOne)
        #expect(trace.result.status == 0, "\(trace.result.stderr)")
        #expect(!trace.events.isEmpty, "strace saw nothing: \(trace.traceHead)")
        #expect(trace.unsyncedPublishes(under: tmp.path) == [])
        #expect(!trace.publishes(under: metrics).isEmpty)
        let entries = trace.publishes(under: cache + "/flows/")
        #expect(entries.count == 12)
        for entry in entries {
            let user = try #require(entry.target.split(separator: "/").dropLast().last?.split(separator: "~").last)
            let row = try #require(trace.firstOutput(containing: "\"user_id\":\"\(user)\""), "no row for \(user)")
            #expect((trace.directorySync(of: entry.target, after: entry.index) ?? .max) < row, "\(entry.target)")
        }
    }

    @Test(
        "warm, format 2: each flow's object published synced before any record names it; each identity's records appended and their segment synced before its row",
        arguments: commits)
    func warmFormatTwo(environment: [String: String]) throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let ids = tmp.file("ids2.jsonl")
        try (0..<6).map { #"{"user_id":"second-\#($0)"}"# }.joined(separator: "\n").write(
            toFile: ids, atomically: true, encoding: .utf8)
        let cache = tmp.file("cache2")
        let trace = try SyscallTrace(
            [
                "warm", "onboarding", "paywall", "--cache-dir", cache, "--api-url", server.url, "--app-id", "demo",
                "--identities", ids, "--format", "json", "--media", "none",
            ], in: tmp, environment: environment.merging(["FPCTL_CACHE_FORMAT": "2"]) { $1 })
        #expect(trace.result.status == 0, "\(trace.result.stderr)")
        #expect(!trace.events.isEmpty, "strace saw nothing: \(trace.traceHead)")
        #expect(trace.unsyncedPublishes(under: cache) == [])
        // The demo's two flows, each stored once, durable with their directory before the first record.
        let objects = trace.publishes(under: cache + "/objects/")
        #expect(objects.count == 2, "\(objects.map(\.target))")
        let firstRecord = try #require(trace.firstFileWrite(under: cache + "/log/", carrying: "second-"))
        for object in objects {
            #expect((trace.directorySync(of: object.target, after: object.index) ?? .max) < firstRecord.index)
        }
        #expect(trace.publishes(under: cache + "/flows/").isEmpty, "no format-1 entry files")
        for user in (0..<6).map({ "second-\($0)" }) {
            let record = try #require(trace.firstFileWrite(under: cache + "/log/", carrying: user), "\(user)")
            #expect(record.path.hasSuffix(".seg"), "\(record.path)")
            let synced = try #require(trace.fileSync(of: record.path, after: record.index), "\(user): never synced")
            let row = try #require(trace.firstOutput(containing: "\"user_id\":\"\(user)\""), "no row for \(user)")
            #expect(synced < row, "\(user): its row came before its records were durable")
        }
    }

    @Test(
        "format 2: a flow's object another writer named but never synced into objects/ (killed) is synced by the next writer before its records name it"
    )
    func objectNamedByAnother() throws {
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let input = tmp.file("object.jsonl")
        try #"{"placement":"paywall","user_id":"first","attributes":{},"ttl_seconds":300,"flow_file":"\#(flow)"}"#
            .write(toFile: input, atomically: true, encoding: .utf8)
        let cache = tmp.file("cache-object")
        let two = ["FPCTL_CACHE_FORMAT": "2"]
        // The first writer is killed once the object has its name, before objects/ is synced.
        let killed = try fpctl(
            ["cache", "put", "--cache-dir", cache, "--input", input],
            environment: two.merging(["FPCTL_FAULT": "object-named"]) { $1 })
        #expect(killed.status == 128 + SIGKILL || killed.status == 9, "\(killed.status) \(killed.stderr)")
        let objects = try FileManager.default.contentsOfDirectory(atPath: cache + "/objects").filter {
            !$0.hasPrefix(".")
        }
        #expect(objects.count == 1)
        // The next writer finds the name there: it syncs objects/ before its record is written.
        try #"{"placement":"paywall","user_id":"second","attributes":{},"ttl_seconds":300,"flow_file":"\#(flow)"}"#
            .write(toFile: input, atomically: true, encoding: .utf8)
        let trace = try SyscallTrace(
            ["cache", "put", "--cache-dir", cache, "--input", input], in: tmp, environment: two)
        #expect(trace.result.status == 0, "\(trace.result.stderr)")
        #expect(trace.publishes(under: cache + "/objects/").isEmpty, "the object is not written again")
        let record = try #require(trace.firstFileWrite(under: cache + "/log/", carrying: "second"))
        let objectsSync = trace.events.firstIndex { event in
            if event == .syncFileSystem { return true }
            if case .sync(_, let path) = event { return path == cache + "/objects" }
            return false
        }
        #expect((objectsSync ?? .max) < record.index, "objects/ was not synced before the record that names its flow")
    }

    @Test(
        "warm: identities whose entries wait for a slow group commit give their places to the next; rows still follow the sync; --concurrency 1 stays one at a time"
    )
    func slowCommitFreesPlace() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let ids = tmp.file("slow-ids.jsonl")
        try (0..<5).map { #"{"user_id":"slow-\#($0)"}"# }.joined(separator: "\n").write(
            toFile: ids, atomically: true, encoding: .utf8)
        // Every syncfs (each commit of the cache's file system) takes 300 ms,
        // as on a disk whose flushes are slow; a resolve here takes milliseconds.
        func traced(concurrency: Int, cache: String) throws -> SyscallTrace {
            try SyscallTrace(
                [
                    "warm", "onboarding", "paywall", "--cache-dir", cache, "--api-url", server.url, "--app-id",
                    "demo", "--identities", ids, "--concurrency", "\(concurrency)", "--media", "none", "--format",
                    "json",
                ], in: tmp, environment: [:].formatOne, delaying: ["syncfs": .milliseconds(300)])
        }
        let cache = tmp.file("slow-cache")
        let trace = try traced(concurrency: 2, cache: cache)
        #expect(trace.result.status == 0, "\(trace.result.stderr)")
        #expect(trace.fileSystemSyncs > 0, "the commit here is syncfs: \(trace.traceHead)")
        #expect(trace.unsyncedPublishes(under: cache) == [])
        for entry in trace.publishes(under: cache + "/flows/") {
            let user = try #require(entry.target.split(separator: "/").dropLast().last?.split(separator: "~").last)
            let row = try #require(trace.firstOutput(containing: "\"user_id\":\"\(user)\""))
            #expect((trace.directorySync(of: entry.target, after: entry.index) ?? .max) < row, "\(entry.target)")
        }
        // slow-0 and slow-1 start; once their flows are written, slow-2 and
        // slow-3 take their places while they wait for the commit; slow-4
        // only once a row is out (at most twice --concurrency in flight).
        let rows = try (0..<5).map { try #require(trace.firstOutput(containing: "\"user_id\":\"slow-\($0)\"")) }
        let writes = try (0..<5).map { try #require(trace.firstFileWrite(containing: "~slow-\($0)/")) }
        #expect(writes[2] < min(rows[0], rows[1]) && writes[3] < min(rows[0], rows[1]), "\(writes) \(rows)")
        #expect(min(rows[0], rows[1], rows[2], rows[3]) < writes[4], "never more than 4 in flight")

        // --concurrency 1: the next identity starts only once a row is out.
        let one = try traced(concurrency: 1, cache: tmp.file("slow-cache-1"))
        #expect(one.result.status == 0, "\(one.result.stderr)")
        let oneRows = try (0..<5).map { try #require(one.firstOutput(containing: "\"user_id\":\"slow-\($0)\"")) }
        let oneWrites = try (0..<5).map { try #require(one.firstFileWrite(containing: "~slow-\($0)/")) }
        for user in 0..<4 {
            #expect(oneRows[user] < oneWrites[user + 1], "slow-\(user + 1) before slow-\(user)'s row")
        }
        #expect(oneRows == oneRows.sorted(), "rows in input order")
    }
}

extension [String: String] {
    /// This environment, writing format-1 caches.
    var formatOne: [String: String] { merging(["FPCTL_CACHE_FORMAT": "1"]) { $1 } }
}
