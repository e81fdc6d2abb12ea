import FlowPilotCore
import Foundation
import Testing

@testable import FlowPilotOutput

/// The one path every `--format` of build, validate and diff takes
/// (`FindingsRendering.rendered(as:)`): what goes to standard output and
/// what to standard error, per format, without reading a file.
@Suite("findings results: one renderer for every format")
struct FindingsRenderingTests {
    static var broken: ValidateReport.File {
        ValidateReport.File(
            file: "broken.fpbundle", valid: false, digest: nil,
            findings: [.error("manifest-hash", "fpbundle.json#/files/flows~1a.json", "sha256 does not match")],
            error: nil, checked: ["fpbundle.json", "flows/a.json"])
    }
    static var missing: ValidateReport.File {
        ValidateReport.File(
            file: "gone.fpbundle", valid: false, digest: nil, findings: [], error: "gone.fpbundle: no such file")
    }
    static var report: ValidateReport { ValidateReport(files: [broken, missing], workingDirectory: "/repo") }

    @Test("text: findings on standard output, a target that could not be checked on standard error before them")
    func text() throws {
        let printout = try Self.report.rendered(as: .plain(.text))
        #expect(
            printout.output
                == "broken.fpbundle: manifest-hash: fpbundle.json#/files/flows~1a.json: sha256 does not match\n")
        #expect(printout.before == [.error("gone.fpbundle: no such file")])
        #expect(printout.after.isEmpty)
        #expect(printout.format == nil)
    }

    @Test("json and every CI format: standard output alone, so a reader takes it whole")
    func machineFormats() throws {
        let json = try Self.report.rendered(as: .plain(.json))
        #expect(json.before.isEmpty && json.after.isEmpty)
        #expect(json.output.contains(#""error":"gone.fpbundle: no such file""#))
        for f in FindingsFormat.allCases {
            let printout = try Self.report.rendered(as: .findings(f))
            #expect(printout.before.isEmpty && printout.after.isEmpty, "\(f)")
            #expect(printout.output == Self.report.findingsReport.rendered(as: f), "\(f)")
            #expect(printout.format == f)
        }
    }

    @Test("a plain format the result lacks is named with the formats it has, before any work")
    func unsupported() {
        #expect(
            ValidateReport.unsupported(.plain(.csv))
                == "--format csv: bundle validate prints text, json, sarif, github, junit, gitlab")
        #expect(BuildReport.unsupported(.plain(.csv)) != nil)
        #expect(DiffReport.unsupported(.plain(.csv)) == nil)
        for name in ["text", "table", "json", "sarif", "github", "junit", "gitlab"] {
            let format = ReportFormat(name: name)
            #expect(format != nil, "\(name)")
            #expect(format.flatMap(ValidateReport.unsupported) == nil, "\(name)")
        }
        #expect(ReportFormat(name: "xml") == nil)
    }

    @Test("a finding is placed at its file when the check found the file, at bundle.json when not: no file is read")
    func placedByTheCheck() {
        var inFlow = Finding.error("flow-action", "flows/a.json#/screens/0", "no such screen")
        inFlow.position = .init(line: 12, column: 9)
        var inMissing = Finding.error("source-missing-flow", "flows/b.json", "not there")
        inMissing.position = .init(line: 4, column: 1)
        // The directory does not exist: a report that looked would place both at bundle.json.
        let report = FindingsReport(
            command: "bundle validate",
            targets: [
                .init(
                    path: "/nonexistent/src", kind: .source, findings: [inFlow, inMissing], cases: [],
                    files: ["bundle.json", "flows/a.json"])
            ], workingDirectory: "/nonexistent")
        #expect(report.located.map(\.file) == ["src/flows/a.json", "src/bundle.json"])
        #expect(report.located.map(\.position?.line) == [12, nil])
        #expect(
            report.located.map(FindingsReport.textLine) == [
                "/nonexistent/src/flows/a.json:12:9: error: flow-action: no such screen",
                "/nonexistent/src/bundle.json: error: source-missing-flow: not there",
            ])
    }
}

/// FlowPilotOutput renders values it is given; it opens, reads and stats
/// nothing (CONTRIBUTING.md, "Layout"), so a report is the same wherever it
/// is rendered and a test can render one from values alone.
@Suite("FlowPilotOutput reads no file")
struct OutputReadsNothingTests {
    @Test("no file system call in any of its sources")
    func noFileAccess() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../Sources/FlowPilotOutput"
        ).standardizedFileURL
        let names = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { $0.hasSuffix(".swift") }
        #expect(names.count >= 10, "\(sources.path)")
        let calls = [
            "FileManager", "fileExists", "contentsOfFile", "Data(contentsOf", "String(contentsOf", "fopen(", " open(",
            "stat(", "opendir(", "currentDirectoryPath",
        ]
        for name in names {
            let text = try String(contentsOf: sources.appendingPathComponent(name), encoding: .utf8)
            for call in calls {
                #expect(!text.contains(call), "Sources/FlowPilotOutput/\(name) calls \(call)")
            }
        }
    }
}
