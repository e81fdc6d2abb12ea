import Foundation
import Testing

@Suite("bundle build: reproducible output and nothing lost on failure")
struct BundleBuildTests {
    /// Copies a sample into `dir`, creating files in the given order with the given mtime.
    func copySample(_ sample: String, to dir: String, reversed: Bool, mtime: String) throws {
        let src = Paths.sample(sample)
        let files = try FileManager.default.subpathsOfDirectory(atPath: src).sorted()
        for rel in (reversed ? files.reversed() : files) {
            var isDir: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: "\(src)/\(rel)", isDirectory: &isDir)
            if isDir.boolValue { continue }
            let target = "\(dir)/\(rel)"
            try FileManager.default.createDirectory(
                atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: "\(src)/\(rel)", toPath: target)
            try run("/usr/bin/touch", ["-d", mtime, target])
        }
    }

    @Test("two builds from shuffled copies with other mtimes, umask, TZ and locale are byte-identical")
    func reproducible() throws {
        let tmp = try TemporaryDirectory()
        try copySample("demo", to: tmp.file("a"), reversed: false, mtime: "2001-02-03 04:05:06")
        try copySample("demo", to: tmp.file("b"), reversed: true, mtime: "2024-12-31 23:59:59")
        let a = try run(
            "/bin/sh",
            [
                "-c", "umask 022; exec \"$0\" bundle build \"$1\" -o \"$2\"", Paths.fpctl, tmp.file("a"),
                tmp.file("a.fpbundle"),
            ],
            environment: ["TZ": "Pacific/Kiritimati", "LC_ALL": "C"])
        let b = try run(
            "/bin/sh",
            [
                "-c", "umask 077; exec \"$0\" bundle build \"$1\" -o \"$2\"", Paths.fpctl, tmp.file("b"),
                tmp.file("b.fpbundle"),
            ],
            environment: ["TZ": "America/Los_Angeles", "LC_ALL": "C.UTF-8"])
        #expect(a.status == 0 && b.status == 0, "\(a.stderr)\(b.stderr)")
        let bytesA = try Data(contentsOf: URL(fileURLWithPath: tmp.file("a.fpbundle")))
        let bytesB = try Data(contentsOf: URL(fileURLWithPath: tmp.file("b.fpbundle")))
        #expect(bytesA == bytesB)
        #expect(a.stdout.prefix(64) == b.stdout.prefix(64))
    }

    @Test("SOURCE_DATE_EPOCH sets every timestamp and the manifest's created_at")
    func sourceDateEpoch() throws {
        let tmp = try TemporaryDirectory()
        let bundle = tmp.file("demo.fpbundle")
        let build = try fpctl(
            ["bundle", "build", Paths.sample("demo"), "-o", bundle],
            environment: ["SOURCE_DATE_EPOCH": "1700000000", "TZ": "Asia/Tokyo"])
        #expect(build.status == 0, "\(build.stderr)")
        let inspect = try fpctl("bundle", "inspect", bundle, "--format", "json")
        #expect(
            inspect.stdout.contains(#""created_at":"2023-11-14T22:13:20Z""#), "\(inspect.stdout)")
        let dates = try run(
            try tool("python3"),
            [
                "-c", "import sys,zipfile; print(set(i.date_time for i in zipfile.ZipFile(sys.argv[1]).infolist()))",
                bundle,
            ])
        #expect(dates.stdout == "{(2023, 11, 14, 22, 13, 20)}\n")
    }

    @Test("an existing output is kept unless --overwrite is given")
    func refusesOverwrite() throws {
        let tmp = try TemporaryDirectory()
        let bundle = tmp.file("demo.fpbundle")
        try Data("precious".utf8).write(to: URL(fileURLWithPath: bundle))
        let refused = try fpctl("bundle", "build", Paths.sample("demo"), "-o", bundle)
        #expect(refused.status == 73)
        #expect(refused.stderr.contains("already exists"))
        #expect(try String(contentsOfFile: bundle, encoding: .utf8) == "precious")
        #expect(try fpctl("bundle", "build", Paths.sample("demo"), "-o", bundle, "--overwrite").status == 0)
        #expect(try fpctl("bundle", "validate", bundle).status == 0)
    }

    @Test("an invalid source is rejected with exit 65, a one-line error per problem, and no output file")
    func invalidSourceLeavesNothing() throws {
        let tmp = try TemporaryDirectory()
        let src = tmp.file("src")
        try copySample("demo", to: src, reversed: false, mtime: "2020-01-01")
        let flowPath = "\(src)/flows/paywall.json"
        var flow = try String(contentsOfFile: flowPath, encoding: .utf8)
        flow = flow.replacingOccurrences(of: "\"screen\": \"plans\"", with: "\"screen\": \"nowhere\"")
        try flow.write(toFile: flowPath, atomically: true, encoding: .utf8)
        let out = tmp.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let build = try fpctl("bundle", "build", src, "-o", "\(out)/demo.fpbundle")
        #expect(build.status == 65)
        // FILE:LINE:COL at the value, counted from the file itself.
        let at = position(of: "\"nowhere\"", in: flow)
        #expect(
            build.stderr.contains(
                "\(src)/flows/paywall.json:\(at.line):\(at.column): error: flow-navigate: navigate targets screen 'nowhere'"
            ),
            "\(build.stderr)")
        #expect(build.stderr.contains("fpctl: error: \(src): 2 errors; nothing was written"))
        #expect(build.stderr.contains("flow-content-hash"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)
    }

    @Test("15,000 screens with one id (14,999 duplicates): the first 20 findings of each rule, then how many more")
    func boundedFindings() throws {
        let tmp = try TemporaryDirectory()
        let src = tmp.file("src")
        try copySample("demo", to: src, reversed: false, mtime: "2020-01-01")
        let flowPath = "\(src)/flows/paywall.json"
        var flow = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: flowPath))) as? [String: Any])
        let screens = try #require(flow["screens"] as? [[String: Any]])
        flow["screens"] = Array(repeating: screens[0], count: 15_000)
        try JSONSerialization.data(withJSONObject: flow).write(to: URL(fileURLWithPath: flowPath))
        let build = try fpctl("bundle", "build", src, "-o", tmp.file("dup.fpbundle"))
        #expect(build.status == 65)
        let lines = build.stderr.split(separator: "\n")
        let duplicates = lines.filter { $0.contains("flow-duplicate-screen") }
        #expect(duplicates.count == 21, "\(lines.count) lines")
        #expect(duplicates.last == "\(src)/flows/paywall.json: error: flow-duplicate-screen: … and 14,979 more")
        #expect(lines.count < 100)
    }

    @Test("a missing source directory is exit 66, an unwritable output exit 73")
    func missingInputAndUnwritableOutput() throws {
        let tmp = try TemporaryDirectory()
        let missing = try fpctl("bundle", "build", tmp.file("nope"), "-o", tmp.file("x.fpbundle"))
        #expect(missing.status == 66)
        #expect(missing.stderr.split(separator: "\n").count == 1)
        let unwritable = try fpctl("bundle", "build", Paths.sample("demo"), "-o", tmp.file("no/such/dir/x.fpbundle"))
        #expect(unwritable.status == 73)
    }

    @Test("an image the flow uses but the source has no copy of is named in the error")
    func missingAsset() throws {
        let tmp = try TemporaryDirectory()
        let src = tmp.file("src")
        try copySample("travel", to: src, reversed: false, mtime: "2020-01-01")
        try FileManager.default.removeItem(atPath: "\(src)/assets/plane.png")
        let build = try fpctl("bundle", "build", src, "-o", tmp.file("t.fpbundle"))
        #expect(build.status == 65)
        let manifest = try String(contentsOfFile: "\(src)/bundle.json", encoding: .utf8)
        let at = position(of: "\"assets/plane.png\"", in: manifest)
        #expect(
            build.stderr.contains(
                "\(src)/bundle.json:\(at.line):\(at.column): error: source-missing-file: assets/plane.png: asset file not found"
            ),
            "\(build.stderr)")
        #expect(!FileManager.default.fileExists(atPath: tmp.file("t.fpbundle")))
    }
}
