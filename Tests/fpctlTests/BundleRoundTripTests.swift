import Foundation
import Testing

@Suite("bundle build, validate, inspect and extract on the sample bundles")
struct BundleRoundTripTests {
    @Test("each sample bundle builds, validates, inspects and extracts", arguments: ["demo", "travel"])
    func roundTrip(sample: String) throws {
        let tmp = try TemporaryDirectory()
        let bundle = tmp.file("\(sample).fpbundle")

        let build = try fpctl("bundle", "build", Paths.sample(sample), "-o", bundle)
        #expect(build.status == 0, "\(build.stderr)")
        let digest = try #require(build.stdout.split(separator: " ").first.map(String.init))
        #expect(digest.count == 64)

        let validate = try fpctl("bundle", "validate", bundle)
        #expect(validate.status == 0, "\(validate.stdout)")
        #expect(validate.stdout == "\(bundle): ok \(digest)\n")

        let inspect = try fpctl("bundle", "inspect", bundle, "--format", "json")
        #expect(inspect.status == 0)
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as? [String: Any])
        #expect(summary["digest"] as? String == digest)
        #expect(summary["app_id"] as? String == sample)
        #expect(summary["schema_version"] as? Int == 1)

        let out = tmp.file("extracted")
        let extract = try fpctl("bundle", "extract", bundle, "-o", out)
        #expect(extract.status == 0, "\(extract.stderr)")
        // Flows come out byte for byte as the source had them.
        let source =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: "\(Paths.sample(sample))/bundle.json"))) as! [String: Any]
        for (key, rel) in source["placements"] as! [String: String] {
            let original = try Data(contentsOf: URL(fileURLWithPath: "\(Paths.sample(sample))/\(rel)"))
            let extracted = try Data(contentsOf: URL(fileURLWithPath: "\(out)/flows/\(key).json"))
            #expect(original == extracted, "flows/\(key).json differs from \(rel)")
        }
        // Nothing but the bundle's own files, and no staging debris.
        let names = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(names == ["flows", "fonts", "manifest.json", "media"])
    }

    @Test("bsdtar, unzip and Python's zipfile read back the same entries and bytes")
    func independentReaders() throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let csv = try fpctl("bundle", "inspect", bundle, "--format", "csv")
        let rows = csv.stdout.split(separator: "\n").dropFirst().map {
            $0.split(separator: ",", omittingEmptySubsequences: false)
        }
        let ours = rows.map { "\($0[1]) \($0[2]) \($0[4])" }

        let bsdtar = try run(try tool("bsdtar"), ["-tf", bundle])
        #expect(bsdtar.status == 0)
        #expect(bsdtar.stdout.split(separator: "\n").map(String.init) == rows.map { String($0[1]) })

        let unzip = try run(try tool("unzip"), ["-t", bundle])
        #expect(unzip.status == 0, "\(unzip.stdout)")
        #expect(unzip.stdout.contains("No errors detected"))

        let script = """
            import hashlib, sys, zipfile
            with zipfile.ZipFile(sys.argv[1]) as z:
                for i in z.infolist():
                    data = z.read(i)
                    print(i.filename, len(data), hashlib.sha256(data).hexdigest())
            """
        let python = try run(try tool("python3"), ["-c", script, bundle])
        #expect(python.status == 0, "\(python.stderr)")
        #expect(python.stdout.split(separator: "\n").map(String.init) == ours)
    }

    @Test("media are stored, JSON and fonts deflated, every entry 0644 and dated created_at")
    func canonicalEntries() throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("travel")
        let script = """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1]) as z:
                for i in z.infolist():
                    print(i.filename, i.compress_type, oct(i.external_attr >> 16), i.create_system, "%04d-%02d-%02dT%02d:%02d:%02d" % i.date_time)
            """
        let listing = try run(try tool("python3"), ["-c", script, bundle]).stdout.split(separator: "\n")
        #expect(listing.first?.hasPrefix("manifest.json ") == true)
        for line in listing {
            let f = line.split(separator: " ")
            let stored = f[0].hasSuffix(".png")
            #expect(f[1] == (stored ? "0" : "8"), "\(f[0]) compression")
            #expect(f[2] == "0o100644" && f[3] == "3", "\(f[0]) mode")
            // travel's bundle.json records created_at 2026-11-01T09:30:00Z.
            #expect(f[4] == "2026-11-01T09:30:00", "\(f[0]) date")
        }
    }
}
