import Foundation
import Testing

/// The malformed and malicious archives of Fixtures/make-hostile-bundles.py,
/// made once per run from a freshly built demo bundle (removed when the run ends).
private let hostile: (dir: TemporaryDirectory, expected: [String: String]) = {
    let dir = try! TemporaryDirectory().removedAtExit()
    let base = dir.file("base.fpbundle")
    let build = try! fpctl("bundle", "build", Paths.sample("demo"), "-o", base)
    precondition(build.status == 0, build.stderr)
    let script = Paths.packageRoot.appendingPathComponent("Tests/fpctlTests/Fixtures/make-hostile-bundles.py").path
    let made = try! run(which("python3") ?? "/usr/bin/python3", [script, base, dir.file("hostile")])
    precondition(made.status == 0, made.stderr)
    let data = try! Data(contentsOf: URL(fileURLWithPath: dir.file("hostile/expected.json")))
    return (dir, try! JSONDecoder().decode([String: String].self, from: data))
}()

@Suite("bundle validate and extract reject hostile archives")
struct HostileBundleTests {
    static let names: [String] = hostile.expected.keys.sorted()

    @Test("there are at least 30 distinct hostile archives")
    func enough() {
        #expect(hostile.expected.count >= 30)
        #expect(Set(hostile.expected.values).count >= 25)
    }

    @Test("each is rejected with exit 65 and the rule it breaks", arguments: names)
    func rejected(name: String) throws {
        let file = hostile.dir.file("hostile/\(name)")
        let result = try fpctl("bundle", "validate", file)
        #expect(result.status == 65, "\(name): \(result.stdout)\(result.stderr)")
        let rule = hostile.expected[name]!
        #expect(result.stdout.contains("\(file): \(rule): "), "\(name) should break \(rule); got:\n\(result.stdout)")
        #expect(!result.stdout.contains(": ok "))
    }

    @Test("extract writes nothing for any of them", arguments: names)
    func extractWritesNothing(name: String) throws {
        // The target sits two levels down, so an entry escaping it with `..`
        // would land inside the snapshot; absolute entries are checked by name.
        let tmp = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: tmp.file("deep/er"), withIntermediateDirectories: true)
        let out = tmp.file("deep/er/out")
        let before = try Self.tree(tmp.path)
        let result = try fpctl("bundle", "extract", hostile.dir.file("hostile/\(name)"), "-o", out)
        #expect(result.status == 65)
        #expect(try Self.tree(tmp.path) == before, "extract left files behind")
        #expect(!FileManager.default.fileExists(atPath: "/etc/cron.d/evil"))
    }

    /// Every path under `root`, with each regular file's size.
    static func tree(_ root: String) throws -> [String: Int] {
        var entries: [String: Int] = [:]
        for path in try FileManager.default.subpathsOfDirectory(atPath: root) {
            let attributes = try FileManager.default.attributesOfItem(atPath: "\(root)/\(path)")
            entries[path] = (attributes[.size] as? Int) ?? -1
        }
        return entries
    }

    @Test("validate --format json reports each file's findings for machines")
    func json() throws {
        let file = hostile.dir.file("hostile/path-traversal.fpbundle")
        let result = try fpctl("bundle", "validate", file, "--format", "json")
        #expect(result.status == 65)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let files = try #require(doc["files"] as? [[String: Any]])
        let findings = try #require(files.first?["findings"] as? [[String: Any]])
        #expect(
            findings.contains {
                $0["rule"] as? String == "zip-path-traversal" && $0["path"] as? String == "../escape.txt"
            })
    }

    @Test("a missing bundle is exit 66 even beside a valid one")
    func missingFile() throws {
        let result = try fpctl(
            "bundle", "validate", hostile.dir.file("base.fpbundle"), hostile.dir.file("absent.fpbundle"))
        #expect(result.status == 66)
        #expect(result.stdout.contains(": ok "))
        #expect(result.stderr.contains("absent.fpbundle: no such file"))
    }
}
