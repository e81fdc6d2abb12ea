import Foundation
import Testing

/// The exact text people and scripts read, pinned: each case runs fpctl in a
/// prepared directory (relative paths, `FPCTL_NOW` fixed, a local `fpctl serve`)
/// and compares standard output with `Golden/<name>.out`. The one measured value,
/// warm's `ms`, is set to 0 before comparing.
///
/// After a deliberate change of output, rewrite the fixtures and review the diff:
///     FPCTL_UPDATE_GOLDEN=1 swift test --filter GoldenTests
@Suite("golden outputs")
struct GoldenTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let arguments: [String]
        let status: Int32
        var scrubMilliseconds = false
        var testDescription: String { name }
    }

    static let warmArgs = [
        "--identities", "ids.jsonl", "--concurrency", "1", "--media", "none", "--app-id", "demo", "--retries", "0",
    ]

    static let cases: [Case] = [
        Case(name: "bundle-inspect-table", arguments: ["bundle", "inspect", "demo.fpbundle"], status: 0),
        Case(
            name: "bundle-inspect-csv", arguments: ["bundle", "inspect", "demo.fpbundle", "--format", "csv"], status: 0),
        Case(
            name: "bundle-inspect-json", arguments: ["bundle", "inspect", "travel.fpbundle", "--format", "json"],
            status: 0),
        Case(name: "bundle-preview-demo", arguments: ["bundle", "preview", "demo.fpbundle"], status: 0),
        Case(
            name: "bundle-preview-compare", arguments: ["bundle", "preview", "demo.fpbundle", "travel.fpbundle"],
            status: 0),
        Case(
            name: "bundle-validate-text", arguments: ["bundle", "validate", "demo.fpbundle", "tampered.fpbundle"],
            status: 65),
        Case(
            name: "bundle-validate-json",
            arguments: ["bundle", "validate", "travel.fpbundle", "tampered.fpbundle", "--format", "json"],
            status: 65),
        Case(name: "cache-info-table", arguments: ["cache", "info", "--cache-dir", "cache"], status: 0),
        Case(
            name: "cache-info-csv", arguments: ["cache", "info", "--cache-dir", "cache", "--format", "csv"], status: 0),
        Case(
            name: "cache-info-json", arguments: ["cache", "info", "--cache-dir", "cache", "--format", "json"], status: 0
        ),
        Case(name: "cache-list-table", arguments: ["cache", "list", "--cache-dir", "cache"], status: 0),
        Case(
            name: "cache-list-csv", arguments: ["cache", "list", "--cache-dir", "cache", "--format", "csv"], status: 0),
        Case(
            name: "cache-list-json", arguments: ["cache", "list", "--cache-dir", "cache", "--format", "json"], status: 0
        ),
        Case(
            name: "warm-table",
            arguments: [
                "warm", "onboarding", "paywall", "nope", "--api-url", "OK", "--cache-dir", "w1", "--user-id", "alice",
                "--media", "none", "--app-id", "demo",
            ],
            status: 0, scrubMilliseconds: true),
        Case(
            name: "warm-summary-csv",
            arguments: [
                "warm", "onboarding", "paywall", "nope", "--api-url", "FAILING", "--cache-dir", "w4",
                "--bundle", "demo.fpbundle", "--summary", "--format", "csv",
            ] + warmArgs,
            status: 3, scrubMilliseconds: true),
        Case(
            name: "warm-csv",
            arguments: [
                "warm", "onboarding", "paywall", "nope", "--api-url", "OK", "--cache-dir", "w2",
                "--format", "csv",
            ] + warmArgs, status: 0, scrubMilliseconds: true),
        Case(
            name: "warm-json-fallbacks",
            arguments: [
                "warm", "onboarding", "paywall", "nope", "--api-url", "FAILING", "--cache-dir", "w3",
                "--bundle", "demo.fpbundle", "--format", "json", "--run-id", "golden",
            ] + warmArgs,
            status: 3, scrubMilliseconds: true),
        Case(
            name: "resolve-network",
            arguments: [
                "resolve", "paywall", "--api-url", "OK", "--app-id", "demo", "--cache-dir", "r1",
                "--user-id", "alice",
            ], status: 0),
        Case(
            name: "resolve-bundled",
            arguments: [
                "resolve", "onboarding", "--api-url", "FAILING", "--app-id", "demo",
                "--cache-dir", "r2", "--bundle", "demo.fpbundle", "--retries", "0",
            ], status: 0),
    ]

    /// Findings in every format, byte for byte: a broken source (a navigate to a
    /// screen that does not exist, which also breaks its content hash) and a
    /// tampered bundle (one image byte changed); `bundle diff` in CSV.
    static let findingsCases: [Case] =
        ["text", "json", "sarif", "github", "junit", "gitlab"].flatMap { format in
            [
                Case(
                    name: "findings-source-\(format)",
                    arguments: ["bundle", "validate", "--source", "broken-src", "--format", format], status: 65),
                Case(
                    name: "findings-bundle-\(format)",
                    arguments: ["bundle", "validate", "tampered.fpbundle", "--format", format], status: 65),
            ]
        } + [
            Case(
                name: "findings-diff-csv",
                arguments: [
                    "bundle", "diff", "travel.fpbundle", "--api-url", "OK", "--app-id", "demo", "--format", "csv",
                ],
                status: 3)
        ]

    @Test("output matches its fixture", arguments: cases + findingsCases)
    func golden(_ c: Case) throws {
        let setup = try GoldenSetup()
        let ok = c.arguments.contains("OK") ? try ServeProcess([Paths.sample("demo"), "-q", "--ttl", "300"]) : nil
        let failing =
            c.arguments.contains("FAILING") ? try ServeProcess([Paths.sample("demo"), "-q", "--fail-rate", "1"]) : nil
        let arguments = c.arguments.map { $0 == "OK" ? ok?.url ?? "" : $0 == "FAILING" ? failing?.url ?? "" : $0 }
        let environment = ["FPCTL_NOW": GoldenSetup.now, "FLOWPILOT_API_KEY": "", "FPCTL_CACHE_DIR": ""]
        let result = try withExtendedLifetime((ok, failing)) {
            try fpctl(arguments, environment: environment, currentDirectory: setup.dir.path)
        }
        #expect(result.status == c.status, "\(result.stderr)")
        let output = c.scrubMilliseconds ? Self.zeroMilliseconds(result.stdout) : result.stdout
        let fixture = Paths.packageRoot.appendingPathComponent("Tests/fpctlTests/Golden/\(c.name).out")
        if ProcessInfo.processInfo.environment["FPCTL_UPDATE_GOLDEN"] == "1" {
            try output.write(to: fixture, atomically: true, encoding: .utf8)
            return
        }
        let expected = try String(contentsOf: fixture, encoding: .utf8)
        #expect(
            output == expected, "\(c.name) differs from its fixture (FPCTL_UPDATE_GOLDEN=1 rewrites it):\n\(output)")
    }

    /// What warm measures, set to fixed values: the `ms` column, the summary's
    /// p50/p95/p99 and the run's start and end, in whichever format.
    static func zeroMilliseconds(_ text: String) -> String {
        if text.hasPrefix("{") {
            return text.replacingOccurrences(
                of: #""(ms|p50_ms|p95_ms|p99_ms)":[0-9]+"#, with: #""$1":0"#, options: .regularExpression
            )
            .replacingOccurrences(
                of: #""(started_at|ended_at)":"[^"]+""#, with: #""$1":"2026-11-01T10:02:00Z""#,
                options: .regularExpression)
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if text.hasPrefix("placement,") {
            return lines.map { line in
                var fields = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                guard line != lines[0], fields.count > 3 else { return line }
                for i in (fields.count - 3)..<fields.count where fields[i] != "-" { fields[i] = "0" }
                return fields.joined(separator: ",")
            }.joined(separator: "\n")
        }
        if text.hasPrefix("identity,") {
            return lines.map { line in
                var fields = line.split(separator: ",", maxSplits: 10, omittingEmptySubsequences: false).map(
                    String.init)
                if fields.count > 9, line != lines[0] { fields[9] = "0" }
                return fields.joined(separator: ",")
            }.joined(separator: "\n")
        }
        // The table: the ms column starts where the header's MS does.
        guard let header = lines.first, let range = header.range(of: " MS") else { return text }
        let offset = header.distance(from: header.startIndex, to: range.lowerBound) + 1
        return lines.enumerated().map { index, line in
            guard index > 0, line.count > offset else { return line }
            let start = line.index(line.startIndex, offsetBy: offset)
            let rest = line[start...]
            let digits = rest.prefix { $0.isNumber }
            let after = rest.dropFirst(digits.count).drop { $0 == " " }
            return String(line[..<start])
                + (after.isEmpty ? "0" : "0".padding(toLength: 7, withPad: " ", startingAt: 0) + after)
        }.joined(separator: "\n")
    }
}

/// The directory a golden case runs in: two bundles, a tampered copy, a cache
/// of flows resolved at fixed times and an identities file. (The cases that
/// talk to a backend start a healthy `fpctl serve` and one failing every
/// resolve; both stop when the case ends.)
final class GoldenSetup: Sendable {
    static let now = "2026-11-01T10:02:00Z"

    let dir: TemporaryDirectory

    init() throws {
        dir = try TemporaryDirectory()
        for name in ["demo", "travel"] {
            let built = try fpctl(
                ["bundle", "build", Paths.sample(name), "-o", "\(name).fpbundle"], currentDirectory: dir.path)
            guard built.status == 0 else { throw GoldenError(message: built.stderr) }
        }
        // One byte of one image changed: its size stays, its SHA-256 does not.
        var tampered = try Data(contentsOf: URL(fileURLWithPath: dir.file("demo.fpbundle")))
        let png = Data([0x89, 0x50, 0x4E, 0x47])
        guard let at = tampered.range(of: png)?.lowerBound else {
            throw GoldenError(message: "no PNG in the demo bundle")
        }
        tampered[at + 40] ^= 0xFF
        try tampered.write(to: URL(fileURLWithPath: dir.file("tampered.fpbundle")))
        // The demo's source with one mistake: a navigate to a screen that does not exist.
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: dir.file("broken-src"))
        let onboarding = dir.file("broken-src/flows/onboarding.json")
        let flow = try String(contentsOfFile: onboarding, encoding: .utf8)
        guard flow.contains(#""screen": "sync""#) else {
            throw GoldenError(message: "the demo has no navigate to sync")
        }
        try flow.replacingOccurrences(of: #""screen": "sync""#, with: #""screen": "nowhere""#)
            .write(toFile: onboarding, atomically: true, encoding: .utf8)

        let flows = Paths.packageRoot.appendingPathComponent("bundles/demo/flows").path
        let entries = [
            #"{"placement":"paywall","user_id":"alice","attributes":{"plan":"pro"},"ttl_seconds":300,"flow_file":"\#(flows)/paywall.json","resolved_at":"2026-11-01T10:00:00Z"}"#,
            #"{"placement":"paywall","user_id":"bob","ttl_seconds":60,"flow_file":"\#(flows)/paywall.json","resolved_at":"2026-10-31T08:00:00Z"}"#,
            #"{"placement":"onboarding","user_id":"alice","attributes":{"plan":"pro"},"ttl_seconds":3600,"flow_file":"\#(flows)/onboarding.json","resolved_at":"2026-11-01T09:30:00Z"}"#,
        ]
        try entries.joined(separator: "\n").write(toFile: dir.file("entries.jsonl"), atomically: true, encoding: .utf8)
        let put = try fpctl(
            ["cache", "put", "--cache-dir", "cache", "--input", "entries.jsonl"], currentDirectory: dir.path)
        guard put.status == 0 else { throw GoldenError(message: put.stderr) }
        try #"{"user_id":"alice","attributes":{"plan":"pro","beta":true}}"#.appending("\n" + #"{"user_id":""}"# + "\n")
            .write(toFile: dir.file("ids.jsonl"), atomically: true, encoding: .utf8)
    }
}

struct GoldenError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
