import FlowPilotCore
import Foundation
import Testing

@testable import FlowPilotOutput

@Suite("findings report renderers")
struct FindingsReportTests {
    static func report(_ findings: [Finding], path: String = "src", kind: FindingsReport.Target.Kind = .source)
        -> FindingsReport
    {
        FindingsReport(
            command: "bundle validate",
            targets: [.init(path: path, kind: kind, findings: findings, cases: [])], workingDirectory: "/repo")
    }

    @Test("a message with %, ',', ':' and a newline stays one annotation; properties escape ':' and ','")
    func githubEscaping() {
        var f = Finding.error("flow-action", "flows/a,b:c.json#/x", "50% off, now: yes\r\nsecond line")
        f.position = .init(line: 3, column: 7)
        let out = Self.report([f], path: "/nonexistent-src").github()
        let lines = out.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count { $0.hasPrefix("::") } == 1)
        #expect(lines.first?.hasSuffix("::50%25 off, now: yes%0D%0Asecond line") == true, "\(out)")
        #expect(lines.first?.contains("title=flow-action::") == true)
        #expect(lines.first?.hasPrefix("::error file=../nonexistent-src/bundle.json,") == true, "\(out)")
        #expect(FindingsReport.githubProperty("a,b:c%") == "a%2Cb%3Ac%25")
    }

    @Test("paths are relative to the working directory, never absolute or empty")
    func relativePaths() {
        #expect(FindingsReport.relative("/repo/bundles/demo", to: "/repo") == "bundles/demo")
        #expect(FindingsReport.relative("./bundles//demo/", to: "/repo") == "bundles/demo")
        #expect(FindingsReport.relative("/repo", to: "/repo") == ".")
        #expect(FindingsReport.relative("/elsewhere/x.fpbundle", to: "/repo/sub") == "../../elsewhere/x.fpbundle")
        #expect(FindingsReport.uriEncoded("a b/#c%/é") == "a%20b/%23c%25/%C3%A9")
    }

    @Test("junit names its suites relative to the working directory the report was given, not the process's")
    func junitWorkingDirectory() {
        let junit = Self.report(
            [Finding.error("flow-navigate", "flows/a.json#/x", "no such screen")], path: "/repo/bundles/demo"
        )
        .junit()
        #expect(junit.contains(#"<testsuite name="bundles/demo""#), "\(junit)")
        #expect(junit.contains(#"classname="bundles/demo/bundle.json""#), "\(junit)")
    }

    @Test("XML text keeps markup and control characters out of the document")
    func xmlEscaping() {
        #expect(FindingsReport.xml("<a & \"b\">\u{1}") == "&lt;a &amp; &quot;b&quot;&gt;\\x01")
    }

    @Test("github prints 10 annotations of a kind, the rest as log lines, and counts them")
    func githubLimit() {
        let findings =
            (0..<25).map { Finding.error("flow-field", "flows/a.json#/\($0)", "m\($0)") }
            + (0..<12).map { Finding.warning("flow-component-type", "flows/a.json#/w\($0)", "w\($0)") }
        let out = Self.report(findings, path: "b.fpbundle", kind: .bundle).github()
        let lines = out.split(separator: "\n")
        #expect(lines.count { $0.hasPrefix("::error ") } == 10)
        #expect(lines.count { $0.hasPrefix("::warning ") } == 10)
        #expect(lines.count { $0.hasPrefix("b.fpbundle: ") } == 17)
        #expect(
            lines.last
                == "fpctl: 25 errors, 12 warnings; the first 10 of each kind are annotations (GitHub shows no more), 17 are log lines above"
        )
    }
}
