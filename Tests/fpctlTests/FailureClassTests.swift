import Foundation
import Testing

/// Each class of resolve failure, from a real `fpctl serve` or a real refused
/// port, gives its error code in the warm row and the documented exit status.
@Suite("failure classes: error code and exit status")
struct FailureClassTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let serve: [String]?
        let warm: [String]
        let code: String
        let status: Int32
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "wrong API key", serve: ["--api-key-file", "KEY"], warm: ["--api-key-file", "WRONG"],
            code: "unauthorized", status: 3),
        Case(name: "no API key", serve: ["--api-key-file", "KEY"], warm: [], code: "unauthorized", status: 3),
        Case(name: "unknown app", serve: [], warm: ["--app-id", "nope"], code: "unknown_app", status: 3),
        Case(
            name: "server error", serve: ["--fail-rate", "1", "--fail-status", "500"], warm: [], code: "http_500",
            status: 3),
        Case(
            name: "slower than the timeout", serve: ["--latency", "1500"],
            warm: ["--timeout", "100ms", "--grace", "0s"],
            code: "timeout", status: 3),
        Case(name: "refused port", serve: nil, warm: [], code: "unreachable", status: 69),
    ]

    @Test("code and exit status", arguments: cases)
    func failureClass(_ c: Case) throws {
        let tmp = try TemporaryDirectory()
        try "right-key\n".write(toFile: tmp.file("key"), atomically: true, encoding: .utf8)
        try "wrong-key\n".write(toFile: tmp.file("wrong"), atomically: true, encoding: .utf8)
        func substitute(_ args: [String]) -> [String] {
            args.map { $0 == "KEY" ? tmp.file("key") : $0 == "WRONG" ? tmp.file("wrong") : $0 }
        }
        let server = try c.serve.map { try ServeProcess([Paths.sample("demo"), "-q"] + substitute($0)) }
        let url = server?.url ?? "http://127.0.0.1:9"  // the discard port: nothing listens on loopback
        var args = [
            "warm", "paywall", "--cache-dir", tmp.file("cache"), "--api-url", url, "--user-id", "u",
            "--media", "none", "--retries", "0", "--format", "json",
        ]
        if !c.warm.contains("--app-id") { args += ["--app-id", "demo"] }
        let r = try fpctl(args + substitute(c.warm), environment: ["FLOWPILOT_API_KEY": ""])
        #expect(r.status == c.status, "\(r.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let row = (json?["rows"] as? [[String: Any]])?.first
        #expect(row?["state"] as? String == "failed")
        #expect((row?["error"] as? [String: Any])?["code"] as? String == c.code, "\(r.stdout)")
        #expect(
            !r.stdout.contains("right-key") && !r.stderr.contains("right-key") && !r.stdout.contains("wrong-key"),
            "the API key is never printed")
    }
}
