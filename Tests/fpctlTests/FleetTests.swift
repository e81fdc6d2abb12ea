import Foundation
import Testing

/// Warm at fleet scale: the per-placement summary, shards merged by `fpctl
/// report`, and metrics for Prometheus, against a real `fpctl serve`.
@Suite("fleet runs: summaries, shards merged by report, Prometheus metrics")
struct FleetTests {
    let tmp: TemporaryDirectory

    init() throws { tmp = try TemporaryDirectory() }

    func identities(_ count: Int) throws -> String {
        try tmp.identities(count) { #"{"plan":"\#($0 % 3 == 0 ? "pro" : "free")"}"# }
    }

    func warm(_ server: ServeProcess, _ args: [String]) throws -> ProcessResult {
        try fpctl(["warm", "--api-url", server.url, "--app-id", "demo", "--media", "none"] + args)
    }

    func json(_ text: String) -> [String: Any] {
        ((try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]) ?? [:]
    }

    /// `summary.placements` keyed by placement, latencies left out (they are measured, not counted).
    func counts(_ summary: Any?) -> [String: [String: AnyHashable]] {
        var out: [String: [String: AnyHashable]] = [:]
        let rows =
            ((summary as? [String: Any])?["placements"] as? [[String: Any]] ?? [])
            + [((summary as? [String: Any])?["total"] as? [String: Any]) ?? [:]]
        for row in rows {
            guard let placement = row["placement"] as? String else { continue }
            var kept: [String: AnyHashable] = [:]
            for (k, v) in row where !k.hasSuffix("_ms") { kept[k] = v as? AnyHashable ?? "\(v)" as AnyHashable }
            out[placement] = kept
        }
        return out
    }

    @Test("the summary: one row per placement and a total, warmed by source, failures by code, percentiles")
    func summary() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--ttl", "300"])
        let ids = try identities(12)
        let bundle = try tmp.buildSample("demo")
        // A first run warms paywall for half of them, so the second sees Tier 0 there.
        let half = tmp.file("half.jsonl")
        try String(
            try String(contentsOfFile: ids, encoding: .utf8).split(separator: "\n").prefix(6)
                .joined(separator: "\n")
        ).write(toFile: half, atomically: true, encoding: .utf8)
        #expect(try warm(server, ["paywall", "--identities", half, "--cache-dir", tmp.file("c")]).status == 0)
        let r = try warm(
            server,
            [
                "onboarding", "paywall", "nope", "--identities", ids, "--cache-dir", tmp.file("c"),
                "--bundle", bundle, "--format", "json", "--run-id", "r-summary",
            ])
        #expect(r.status == 0, "\(r.stderr)")
        let document = json(r.stdout)
        let run = document["run"] as? [String: Any]
        #expect(run?["run_id"] as? String == "r-summary" && run?["shard"] is NSNull)
        #expect(run?["placements"] as? [String] == ["onboarding", "paywall", "nope"])
        let summary = counts(document["summary"])
        #expect(summary["paywall"]?["identities"] as? Int == 12 && summary["paywall"]?["cache"] as? Int == 6)
        #expect(summary["paywall"]?["network"] as? Int == 6 && summary["onboarding"]?["network"] as? Int == 12)
        #expect(summary["nope"]?["no_flow"] as? Int == 12 && summary["TOTAL"]?["identities"] as? Int == 36)
        #expect(summary["TOTAL"]?["warmed"] as? Int == 24)
        let paywall = ((document["summary"] as? [String: Any])?["placements"] as? [[String: Any]])?
            .first { $0["placement"] as? String == "paywall" }
        let p50 = paywall?["p50_ms"] as? Int ?? -1
        let p99 = paywall?["p99_ms"] as? Int ?? -1
        #expect(p50 >= 0 && p99 >= p50, "percentiles from the histogram: p50 \(p50) <= p99 \(p99)")

        // The table shows rows, then the summary; --summary shows the summary alone.
        let table = try warm(server, ["paywall", "--identities", ids, "--cache-dir", tmp.file("c")])
        let parts = table.stdout.components(separatedBy: "\n\n")
        #expect(parts.count == 2 && parts[1].hasPrefix("PLACEMENT  IDENTITIES  WARMED"))
        #expect(parts[1].contains("\nTOTAL "))
        let only = try warm(server, ["paywall", "--identities", ids, "--cache-dir", tmp.file("c"), "--summary"])
        #expect(only.stdout.hasPrefix("PLACEMENT ") && !only.stdout.contains("IDENTITY"))
        let failing = try ServeProcess([Paths.sample("demo"), "-q", "--fail-rate", "1"])
        let failed = try warm(
            failing,
            [
                "paywall", "--identities", ids, "--cache-dir", tmp.file("f"), "--summary", "--format", "csv",
                "--retries", "0",
            ])
        #expect(failed.status == 3)
        let lines = failed.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("placement,identities,warmed,network,cache,stale_cache,bundled_default") == true)
        #expect(
            lines.dropFirst().first?.hasPrefix("paywall,12,0,0,0,0,0,0,12,http_503=12,-,") == true, "\(failed.stdout)")
    }

    @Test("4 shards over 2,000 identities: disjoint rows, together the unsharded run, and report gives its summary")
    func shardsMerged() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--ttl", "300"])
        let ids = try identities(2000)
        let whole = try warm(
            server,
            [
                "onboarding", "paywall", "--identities", ids, "--cache-dir", tmp.file("whole"), "--format", "json",
                "--concurrency", "16",
            ])
        try whole.stdout.write(toFile: tmp.file("whole.json"), atomically: true, encoding: .utf8)
        func rows(_ text: String) -> [String] {
            (json(text)["rows"] as? [[String: Any]] ?? []).map {
                "\($0["user_id"] ?? "") \($0["placement"] ?? "") \($0["state"] ?? "") \($0["delivery_source"] ?? "")"
            }
        }
        var union: [String] = []
        var shardFiles: [String] = []
        for k in 1...4 {
            let shard = try warm(
                server,
                [
                    "onboarding", "paywall", "--identities", ids, "--cache-dir", tmp.file("shard\(k)"),
                    "--format", "json", "--shard", "\(k)/4", "--run-id", "fleet-1", "--concurrency", "16",
                ])
            #expect(shard.status == 0)
            let path = tmp.file("shard\(k).json")
            try shard.stdout.write(toFile: path, atomically: true, encoding: .utf8)
            shardFiles.append(path)
            let these = rows(shard.stdout)
            #expect(Set(these).isDisjoint(with: union), "shard \(k) repeats rows of an earlier shard")
            union += these
        }
        #expect(union.sorted() == rows(whole.stdout).sorted())
        #expect(union.count == 4000)

        let merged = try fpctl(["report", "--format", "json"] + shardFiles)
        #expect(merged.status == 0, "\(merged.stderr)")
        #expect(counts(json(merged.stdout)["summary"]) == counts(json(whole.stdout)["summary"]))
        #expect(json(merged.stdout)["rows"] as? Int == 4000)
        let alone = try fpctl(["report", "--format", "json", tmp.file("whole.json")])
        #expect(counts(json(alone.stdout)["summary"]) == counts(json(whole.stdout)["summary"]))
    }

    @Test("report refuses inputs whose rows would count twice, naming both files, and incomplete outputs")
    func reportRefuses() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let ids = try identities(40)
        func shard(_ spec: String?, run: String, name: String) throws -> String {
            let path = tmp.file(name)
            let args =
                [
                    "paywall", "--identities", ids, "--cache-dir", tmp.file("c-\(name)"), "--format", "json",
                    "--run-id", run,
                ] + (spec.map { ["--shard", $0] } ?? [])
            try warm(server, args).stdout.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let one = try shard("1/2", run: "r", name: "one.json")
        let two = try shard("2/2", run: "r", name: "two.json")
        let whole = try shard(nil, run: "r", name: "whole.json")
        let thirds = try shard("1/3", run: "r", name: "third.json")
        let otherDay = try shard(nil, run: "r-next-day", name: "day2.json")
        #expect(try fpctl(["report", one, two, otherDay]).status == 0, "distinct shards and another run merge")
        let trimmed = tmp.file("trimmed.json")
        try String(try String(contentsOfFile: otherDay, encoding: .utf8).dropLast())
            .write(toFile: trimmed, atomically: true, encoding: .utf8)
        #expect(try fpctl(["report", trimmed]).status == 0, "a copy without the final newline reads the same")
        for (a, b) in [(one, one), (one, whole), (one, thirds)] {
            let refused = try fpctl(["report", a, b])
            #expect(refused.status == 65)
            #expect(refused.stderr.contains("report-overlap: \(a) and \(b): "), "\(refused.stderr)")
        }
        // A shard file whose run says 2/2 but holds shard 1's rows.
        let mislabelled = tmp.file("mislabelled.json")
        try String(contentsOfFile: one, encoding: .utf8).replacingOccurrences(
            of: #""shard":"1/2""#, with: #""shard":"2/2""#
        )
        .write(toFile: mislabelled, atomically: true, encoding: .utf8)
        let misplaced = try fpctl(["report", one, mislabelled])
        #expect(misplaced.status == 65 && misplaced.stderr.contains("report-overlap"), "\(misplaced.stderr)")

        let cut = tmp.file("cut.json")
        let text = try String(contentsOfFile: whole, encoding: .utf8)
        try String(text.prefix(text.count / 2)).write(toFile: cut, atomically: true, encoding: .utf8)
        let incomplete = try fpctl(["report", cut])
        #expect(incomplete.status == 65 && incomplete.stderr.contains("report-input: \(cut): "))
        #expect(try fpctl(["report", tmp.file("absent.json")]).status == 66)
        #expect(try warm(server, ["paywall", "--run-id", "", "--cache-dir", tmp.file("e")]).status == 64)
    }

    @Test("--metrics-file: Prometheus text that promtool accepts, with the run's counts, written whole")
    func metrics() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let ids = try identities(10)
        let file = tmp.file("fpctl.prom")
        let r = try fpctl([
            "warm", "onboarding", "paywall", "nope", "--api-url", server.url, "--app-id", "demo", "--identities", ids,
            "--cache-dir", tmp.file("c"), "--media", "first-screen", "--metrics-file", file,
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let check = try run(try tool("promtool"), ["check", "metrics"], stdinFile: file)
        #expect(check.status == 0, "promtool: \(check.stdout)\(check.stderr)")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        for line in [
            #"fpctl_warm_outcomes_total{placement="paywall",state="warmed",delivery_source="network"} 10"#,
            #"fpctl_warm_outcomes_total{placement="nope",state="no_flow",delivery_source="none"} 10"#,
            #"fpctl_warm_requests_total{endpoint="resolve-batch",status="200"} 10"#,
            "fpctl_warm_resolve_duration_seconds_count 30", "fpctl_warm_last_run_success 1.0",
        ] {
            #expect(text.contains(line + "\n"), "missing: \(line)\n\(text)")
        }
        #expect(text.contains(#"fpctl_warm_requests_total{endpoint="media",status="200"}"#))
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.path).filter { $0.hasPrefix(".") }.isEmpty)

        let failing = try ServeProcess([Paths.sample("demo"), "-q", "--fail-rate", "1"])
        let failed = try fpctl([
            "warm", "paywall", "--api-url", failing.url, "--app-id", "demo", "--identities", ids, "--cache-dir",
            tmp.file("f"), "--retries", "0", "--metrics-file", file,
        ])
        #expect(failed.status == 3)
        let failedText = try String(contentsOfFile: file, encoding: .utf8)
        #expect(failedText.contains(#"fpctl_warm_failures_total{placement="paywall",error="http_503"} 10"#))
        #expect(failedText.contains("fpctl_warm_last_run_success 0.0"))

        let nowhere = try fpctl([
            "warm", "paywall", "--api-url", server.url, "--app-id", "demo", "--cache-dir", tmp.file("n"),
            "--metrics-file", tmp.file("no/such/dir/fpctl.prom"),
        ])
        #expect(nowhere.status == 73, "checked before anything is warmed")
        #expect(!FileManager.default.fileExists(atPath: tmp.file("n")))
    }

    @Test("a warm killed mid-run leaves a clean cache whose aliases point at complete entries")
    func killedWarm() async throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--ttl", "300", "--latency", "2"])
        let ids = try identities(5000)
        let cache = tmp.file("killed")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Paths.fpctl)
        p.arguments = [
            "warm", "onboarding", "paywall", "--api-url", server.url, "--app-id", "demo", "--media", "none",
            "--identities", ids, "--cache-dir", cache, "--format", "csv",
        ]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Killed once some entries exist, long before 5,000 identities are done.
        let deadline = Date().addingTimeInterval(20)
        // Format 1's entry files, or about how many records format 2's segments hold.
        func entries() -> Int {
            (FileManager.default.enumerator(atPath: "\(cache)/flows")?.allObjects as? [String] ?? [])
                .filter { $0.hasSuffix(".json") }.count + loggedRecords(cache)()
        }
        while entries() < 200 && p.isRunning && Date() < deadline { usleep(10_000) }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        #expect(p.terminationReason == .uncaughtSignal, "the warm was still running when killed")
        // Clean, but for the torn last record a writer killed inside an append can leave: debris,
        // which readers stop before (docs/cache-format.md, "Segments").
        let verify = try fpctl(["cache", "verify", "--cache-dir", cache])
        let problems = verify.stdout.split(separator: "\n").filter { $0 != "ok" }
        #expect(problems.allSatisfy { $0.hasPrefix("cache-temp-debris: log/") }, "\(verify.stdout)")
        let offline = try fpctl([
            "resolve", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--user-id", "newcomer",
            "--cache-dir", cache, "--retries", "0",
        ])
        #expect(offline.stdout.contains("tier 2 stale cache: served the last-known-good flow"), "\(offline.stdout)")
    }
}
