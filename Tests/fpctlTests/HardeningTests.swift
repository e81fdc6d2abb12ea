import FlowPilotCore
import Foundation
import Testing

/// Inputs nobody here wrote: symlinks and special files in a bundle source,
/// media that are not what their names say, a cache that cannot be written,
/// files a prune cannot remove.
@Suite("hardening: hostile sources, hidden failures")
struct HardeningTests {
    let tmp: TemporaryDirectory

    init() throws { tmp = try TemporaryDirectory() }

    /// A copy of the demo source to break, as `name` in the temporary directory.
    func demoCopy(_ name: String = "demo") throws -> String {
        let source = tmp.file(name)
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: source)
        return source
    }

    @Test("a symlink anywhere in a source is refused, and no byte of its target reaches a bundle")
    func symlinks() throws {
        let source = try demoCopy()
        let badge = "\(source)/assets/badge.png"
        try FileManager.default.removeItem(atPath: badge)
        try FileManager.default.createSymbolicLink(atPath: badge, withDestinationPath: "/etc/passwd")
        let out = tmp.file("out.fpbundle")
        let r = try fpctl("bundle", "build", source, "-o", out)
        #expect(r.status == 65)
        #expect(
            r.stderr.contains("\(source)/assets/badge.png: error: source-symlink: assets/badge.png is a symbolic link"),
            "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))

        // A symlinked directory on the way is refused the same way.
        let other = try demoCopy("demo2")
        try FileManager.default.moveItem(atPath: "\(other)/assets", toPath: tmp.file("elsewhere"))
        try FileManager.default.createSymbolicLink(
            atPath: "\(other)/assets", withDestinationPath: tmp.file("elsewhere"))
        let viaDirectory = try fpctl("bundle", "build", other, "-o", out)
        #expect(
            viaDirectory.status == 65
                && viaDirectory.stderr.contains("\(other)/assets/badge.png: error: source-symlink: "))
        #expect(viaDirectory.stderr.contains("assets is a symbolic link"))
    }

    @Test("a FIFO or a symlinked bundle.json is refused too")
    func specialFiles() throws {
        let source = try demoCopy()
        let badge = "\(source)/assets/badge.png"
        try FileManager.default.removeItem(atPath: badge)
        #expect(mkfifo(badge, 0o644) == 0)
        let r = try fpctl("bundle", "build", source, "-o", tmp.file("out.fpbundle"))
        #expect(
            r.status == 65 && r.stderr.contains("\(source)/assets/badge.png: error: source-special-file: "),
            "\(r.stderr)")

        let linked = try demoCopy("demo2")
        try FileManager.default.moveItem(atPath: "\(linked)/bundle.json", toPath: tmp.file("bundle.json"))
        try FileManager.default.createSymbolicLink(
            atPath: "\(linked)/bundle.json", withDestinationPath: tmp.file("bundle.json"))
        let manifest = try fpctl("bundle", "build", linked, "-o", tmp.file("out2.fpbundle"))
        #expect(
            manifest.status == 65
                && manifest.stderr.contains(
                    "\(linked)/bundle.json: error: source-symlink: bundle.json is a symbolic link"),
            "\(manifest.stderr)")
    }

    @Test("media and fonts must be what their extension says, at build and at validate")
    func mediaTypes() throws {
        let source = try demoCopy()
        try FileManager.default.removeItem(atPath: "\(source)/assets/badge.png")
        try FileManager.default.copyItem(atPath: "/etc/passwd", toPath: "\(source)/assets/badge.png")
        let r = try fpctl("bundle", "build", source, "-o", tmp.file("out.fpbundle"))
        #expect(r.status == 65)
        #expect(
            r.stderr.contains(
                "\(source)/assets/badge.png: error: media-type-mismatch: the content is no known media or font type, the .png extension says png"
            ),
            "\(r.stderr)")
        // The sample bundles' real PNGs and TTFs pass both checks.
        let good = try tmp.buildSample("travel")
        #expect(try fpctl("bundle", "validate", good).status == 0)
    }

    @Test("a created_at no zip timestamp can hold is refused at build, not written into headers")
    func createdAtRange() throws {
        let source = try demoCopy()
        let path = "\(source)/bundle.json"
        var json =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [String: Any]
        json["created_at"] = "2226-01-01T00:00:00Z"
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
        let r = try fpctl("bundle", "build", source, "-o", tmp.file("out.fpbundle"))
        #expect(r.status == 65)
        // At the line and column of the value, counted from the file itself.
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let position = position(of: "\"2226-01-01", in: text)
        #expect(
            r.stderr.contains(
                "\(source)/bundle.json:\(position.line):\(position.column): error: source-field: created_at must be before 2108"
            ),
            "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: tmp.file("out.fpbundle")))
    }

    @Test("a header that is not canonical is reported by its field, with both values")
    func noncanonicalHeaderNamesTheField() throws {
        let bundle = try tmp.buildSample("demo")
        // Python's zipfile, from the same files: no data descriptors, so flags 0.
        _ = try fpctl("bundle", "extract", bundle, "-o", tmp.file("files"))
        let script = """
            import os, sys, zipfile
            os.chdir(sys.argv[1])
            names = sorted(os.path.relpath(os.path.join(d, f)) for d, _, fs in os.walk('.') for f in fs)
            names.remove('manifest.json')
            with zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED) as z:
                for n in ['manifest.json'] + names: z.write(n, n)
            """
        let zipped = try run(
            which("python3") ?? "/usr/bin/python3", ["-c", script, tmp.file("files"), tmp.file("py.fpbundle")])
        #expect(zipped.status == 0, "\(zipped.stderr)")
        let python = try fpctl("bundle", "validate", tmp.file("py.fpbundle"))
        #expect(python.status == 65)
        #expect(
            python.stdout.contains(
                "zip-noncanonical-header: manifest.json: local header: flags 0x0000 (canonical 0x0008); central record: flags 0x0000 (canonical 0x0008); data descriptor missing"
            ), "\(python.stdout)")

        // fpctl's own bundle with the first central record's timestamp field renamed.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: bundle)))
        let signature = Data([0x50, 0x4B, 0x01, 0x02])
        let central = try #require(Data(bytes).firstRange(of: signature)?.lowerBound)
        let nameLength = Int(bytes[central + 28]) | Int(bytes[central + 29]) << 8
        #expect(bytes[central + 46 + nameLength] == 0x55 && bytes[central + 47 + nameLength] == 0x54)
        bytes[central + 46 + nameLength] = 0x56
        try Data(bytes).write(to: URL(fileURLWithPath: tmp.file("patched.fpbundle")))
        let patched = try fpctl("bundle", "validate", tmp.file("patched.fpbundle"))
        #expect(patched.status == 65)
        #expect(
            patched.stdout.contains(
                "zip-noncanonical-header: manifest.json: central record: extra field 0x5455 missing"),
            "\(patched.stdout)")
    }

    @Test("a cache write that fails is a failed outcome (cache-write, naming errno) and exit 73, not 'warmed'")
    func cacheWriteFails() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--ttl", "300"])
        let cache = tmp.file("cache")
        #expect(try fpctl("cache", "put", "--cache-dir", cache, "--input", "/dev/null").status == 0)
        // A file size limit of one block with SIGXFSZ ignored: writing a ~2 KB entry
        // fails with EFBIG. Standard output is a pipe, which the limit does not cover.
        let bundle = try tmp.buildSample("demo")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c", "ulimit -f 1; trap '' XFSZ; exec \"$0\" \"$@\"", Paths.fpctl, "warm", "paywall",
            "--api-url", server.url, "--app-id", "demo", "--user-id", "u", "--cache-dir", cache, "--media", "none",
            "--format", "json", "--bundle", bundle,
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        // 73 (cannot write), not the retryable 3: the cache needs a person, not a retry.
        #expect(process.terminationStatus == 73)
        let rows = (try JSONSerialization.jsonObject(with: stdout) as? [String: Any])?["rows"] as? [[String: Any]]
        let row = rows?.first
        #expect(row?["state"] as? String == "failed", "no fallback hides a cache that cannot be written")
        let error = row?["error"] as? [String: Any]
        #expect(error?["code"] as? String == "cache-write")
        #expect((error?["message"] as? String)?.contains("EFBIG") == true, "\(error ?? [:])")
        #expect(try fpctl("cache", "verify", "--cache-dir", cache).status == 0, "nothing torn was left")
    }

    @Test("a bundle build onto a full disk names the error, exits 73 and leaves no file behind")
    func buildOntoFullDisk() throws {
        // A 32 KiB tmpfs (CI runs as root): the demo bundle is ~54 KB, so the
        // disk fills in the middle of the archive, in the writer thread.
        let disk = tmp.file("full")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: false)
        let mounted = try run("/bin/mount", ["-t", "tmpfs", "-o", "size=32k", "tmpfs", disk])
        try #require(mounted.status == 0, "mounting a tmpfs needs root: \(mounted.stderr)")
        defer { _ = try? run("/bin/umount", [disk]) }
        let result = try fpctl("bundle", "build", Paths.sample("demo"), "-o", "\(disk)/demo.fpbundle")
        #expect(result.status == 73)
        #expect(result.stderr == "fpctl: error: \(disk)/demo.fpbundle: No space left on device (ENOSPC)\n")
        #expect(result.stdout.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk).isEmpty, "no partial or temporary file")
    }

    @Test("prune and clear report only what they removed, and name what they could not (exit 73)")
    func undeletable() throws {
        let cache = tmp.file("cache")
        let flows = Paths.packageRoot.appendingPathComponent("bundles/demo/flows").path
        let lines = (0..<3).map {
            #"{"placement":"paywall","user_id":"u\#($0)","ttl_seconds":60,"flow_file":"\#(flows)/paywall.json","resolved_at":"2026-01-01T00:00:00Z"}"#
        }
        try lines.joined(separator: "\n").write(toFile: tmp.file("in.jsonl"), atomically: true, encoding: .utf8)
        // Format 1, whose entries are files of their own (format 2's segments: HardeningTests.undeletableSegment).
        #expect(
            try fpctl(
                ["cache", "put", "--cache-dir", cache, "--input", tmp.file("in.jsonl")],
                environment: ["FPCTL_CACHE_FORMAT": "1"]
            ).status == 0)
        let entries = try FileManager.default.subpathsOfDirectory(atPath: "\(cache)/flows").filter {
            $0.hasSuffix(".json")
        }
        let stuck = "\(cache)/flows/\(try #require(entries.first))"
        // An immutable file: not even root can unlink it.
        try #require(try run(try tool("chattr"), ["+i", stuck]).status == 0, "chattr +i needs root and ext4")
        defer { _ = try? run("/usr/bin/chattr", ["-i", stuck]) }
        let pruned = try fpctl(
            "cache", "prune", "--cache-dir", cache, "--older-than", "1s", "--flows", "--format", "json")
        #expect(pruned.status == 73, "\(pruned.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(pruned.stdout.utf8)) as? [String: Any]
        let removed = (document?["removed"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "flow" }
            .compactMap { $0["path"] as? String }
        #expect(
            removed.count == 2 && !removed.contains { stuck.hasSuffix($0) }, "the stuck entry is not reported removed")
        #expect(((document?["failed"] as? [[String: Any]])?.first?["reason"] as? String)?.contains("EPERM") == true)
        #expect(pruned.stderr.contains("fpctl: warning: could not remove flows/"))
        #expect(FileManager.default.fileExists(atPath: stuck))

        let others = try ["flows", "aliases"].flatMap { dir in
            try FileManager.default.subpathsOfDirectory(atPath: "\(cache)/\(dir)").map { "\(cache)/\(dir)/\($0)" }
        }.filter { path in
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isDir) && !isDir.boolValue
                && path != stuck
        }
        let cleared = try fpctl("cache", "clear", "--cache-dir", cache, "--flows", "--force")
        #expect(cleared.status == 73 && cleared.stderr.contains("could not remove flows/"), "\(cleared.stderr)")
        #expect(cleared.stderr.contains("cleared flows: \(others.count) files"), "only what went: \(cleared.stderr)")
    }

    @Test("format 2: a segment prune cannot remove keeps its records, and prune says they were not removed (73)")
    func undeletableSegment() throws {
        let cache = tmp.file("cache2")
        let flows = Paths.packageRoot.appendingPathComponent("bundles/demo/flows").path
        let lines = (0..<3).map {
            #"{"placement":"paywall","user_id":"u\#($0)","ttl_seconds":60,"flow_file":"\#(flows)/paywall.json"}"#
        }
        try lines.joined(separator: "\n").write(toFile: tmp.file("in2.jsonl"), atomically: true, encoding: .utf8)
        #expect(
            try fpctl(
                ["cache", "put", "--cache-dir", cache, "--input", tmp.file("in2.jsonl")],
                environment: ["FPCTL_CACHE_FORMAT": "2"]
            ).status == 0)
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: "\(cache)/log").first { $0.hasSuffix(".seg") })
        let stuck = "\(cache)/log/\(segment)"
        try #require(try run(try tool("chattr"), ["+i", stuck]).status == 0, "chattr +i needs root and ext4")
        defer { _ = try? run("/usr/bin/chattr", ["-i", stuck]) }
        let pruned = try fpctl("cache", "prune", "--cache-dir", cache, "--user-id", "u1", "--format", "json")
        #expect(pruned.status == 73, "\(pruned.stderr)")
        #expect(pruned.stderr.contains("could not remove log/\(segment)#"), "\(pruned.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(pruned.stdout.utf8)) as? [String: Any]
        #expect(((document?["failed"] as? [[String: Any]])?.first?["reason"] as? String)?.contains("EPERM") == true)
        // The identity's entry is still read, and prune said so: nothing claimed that was not done.
        #expect(try fpctl("cache", "list", "--cache-dir", cache, "--user-id", "u1").stdout.contains("u1"))
    }

    @Test("warnings say warning once; identities errors name the file")
    func messages() throws {
        let source = try demoCopy()
        let bundle = try String(contentsOfFile: "\(source)/bundle.json", encoding: .utf8)
            .replacingOccurrences(
                of: #""assets": {"#, with: #""assets": {"https://cdn.example.com/unused.png": "assets/badge.png", "#)
        try bundle.write(toFile: "\(source)/bundle.json", atomically: true, encoding: .utf8)
        let built = try fpctl("bundle", "build", source, "-o", tmp.file("out.fpbundle"))
        #expect(built.status == 0, "\(built.stderr)")
        #expect(
            built.stderr.contains("\(source)/assets/badge.png: warning: source-unreferenced-asset: "), "\(built.stderr)"
        )
        #expect(!built.stderr.contains("warning: warning:"))

        let ids = tmp.file("ids.jsonl")
        try "{\"user_id\":\"a\"}\n{not json\n".write(toFile: ids, atomically: true, encoding: .utf8)
        let warm = try fpctl(
            "warm", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--identities", ids,
            "--cache-dir", tmp.file("c"), "--retries", "0")
        #expect(warm.status == 65)
        #expect(warm.stderr.contains("jsonl: \(ids):2: "), "\(warm.stderr)")
        // The bad line read from the chunk the loop has, with no identity in flight (the one before it is
        // another shard's): the run ends there with 65, with or without images, never waits for nothing.
        let own = Shard.index(of: Identity(userID: "a").fingerprint, among: 1000)
        for media in ["none", "first-screen"] {
            let other = try fpctl(
                "warm", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--identities", ids,
                "--cache-dir", tmp.file("c-\(media)"), "--retries", "0", "--media", media,
                "--shard", "\(own % 1000 + 1)/1000")
            #expect(other.status == 65, "--media \(media): \(other.stderr)")
            #expect(other.stderr.contains("jsonl: \(ids):2: "), "\(other.stderr)")
        }
    }

    @Test("a public key that does not parse throws instead of skipping the signature check")
    func badPublicKey() throws {
        let bundle = try tmp.buildSample("demo")
        var options = BundleValidator.Options()
        options.publicKey = Data([1, 2, 3])
        #expect(throws: FPError.self) { try BundleValidator.validate(bundle, options: options) }
        options.publicKey = nil
        #expect(try BundleValidator.validate(bundle, options: options).isValid)
    }
}
