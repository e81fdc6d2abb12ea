import Foundation
import Testing

/// `Tests/hostile/backend.py` started for a test: a resolve backend that
/// misbehaves on purpose (its docstring lists how), on loopback.
final class HostileBackend: @unchecked Sendable {
    let process = Process()
    let url: String

    init(hugeMiB: Int = 500) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Paths.packageRoot.path + "/Tests/hostile/backend.py", "--huge-mb", String(hugeMiB)]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        url = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The API URL of one misbehaviour (`retry-after:-1e300`, `ttl:"86400"`, `image:trickle`, …).
    func api(_ mode: String) -> String {
        "\(url)/m/\(mode.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? mode)"
    }

    deinit {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// Runs a shell command line (for `ulimit`, `umask`, `setpriv` and `faketime` in front of fpctl).
private func sh(_ script: String, environment: [String: String] = [:], timeout: TimeInterval = 120) throws
    -> ProcessResult
{
    try run("/bin/sh", ["-c", script], environment: environment, timeout: timeout)
}

private func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }

private func putLines(_ users: Range<Int>, flow: String, extra: String = "") -> String {
    users.map { #"{"placement":"paywall","user_id":"u\#($0)","flow_file":"\#(flow)"\#(extra)}"# }
        .joined(separator: "\n") + "\n"
}

private func csvRows(_ text: String) -> [[Substring]] {
    text.split(separator: "\n").dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false) }
}

/// Many processes on one cache directory, odd clocks, process limits and
/// hostile backends (docs/cache-format.md, "Many writers" and "Time";
/// docs/fleet.md, "Limits"). Each asserts what a fleet relies on: nothing
/// lost, no crash, no hang, the documented exit status.
@Suite("fpctl among many writers, odd clocks, low limits and hostile backends")
struct SharedCacheCommandTests {
    let flow = Paths.sample("demo") + "/flows/paywall.json"

    @Test("two cache put runs of the same 1,500 keys at once, 2 rounds: never a key left empty, no dangling alias")
    func twoWritersOfOneKey() throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("cache")
        let input = tmp.file("in.jsonl")
        try putLines(0..<1500, flow: flow).write(toFile: input, atomically: true, encoding: .utf8)
        for round in 0..<2 {
            let writers = (0..<2).map { _ -> Process in
                let p = Process()
                p.executableURL = URL(fileURLWithPath: Paths.fpctl)
                p.arguments = ["cache", "put", "--cache-dir", dir, "--input", input]
                p.standardError = FileHandle.nullDevice
                p.standardOutput = FileHandle.nullDevice
                try? p.run()
                return p
            }
            for w in writers {
                w.waitUntilExit()
                #expect(w.terminationStatus == 0, "round \(round)")
            }
            let list = try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv")
            #expect(Set(csvRows(list.stdout).map { $0[1] }).count == 1500, "round \(round): a key was left empty")
            let verify = try fpctl("cache", "verify", "--cache-dir", dir)
            #expect(verify.status == 0, "round \(round): \(verify.stdout.prefix(500))")
        }
        // And what a pod finds on the key the writers shared: every key directory holds an entry.
        let keyDirs = try FileManager.default.contentsOfDirectory(atPath: "\(dir)/flows/paywall")
        for key in keyDirs {
            let files = try FileManager.default.contentsOfDirectory(atPath: "\(dir)/flows/paywall/\(key)")
            #expect(!files.isEmpty, "\(key) is empty")
        }
    }

    @Test("two warm runs at once over the same stale identities: both warm every row, every key keeps an entry")
    func twoWarms() throws {
        let tmp = try TemporaryDirectory()
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let ids = try tmp.identities(300)
        let dir = tmp.file("cache")
        // development: a 0 s TTL, so each run finds every entry stale and writes it again.
        let args = [
            "warm", "paywall", "onboarding", "--cache-dir", dir, "--api-url", server.url, "--app-id", "demo",
            "--identities", ids, "--media", "none", "--environment", "development", "--format", "json",
        ]
        #expect(try fpctl(args).status == 0)
        let runs = (0..<2).map { _ -> Process in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Paths.fpctl)
            p.arguments = args
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try? p.run()
            return p
        }
        for r in runs {
            r.waitUntilExit()
            #expect(r.terminationStatus == 0)
        }
        let list = try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv")
        #expect(csvRows(list.stdout).count == 600, "a key lost its entry")
        #expect(try fpctl("cache", "verify", "--cache-dir", dir).status == 0)
    }

    @Test("six processes initializing one new cache directory at once, 5 rounds: all succeed")
    func manyInitializers() throws {
        let tmp = try TemporaryDirectory()
        let input = tmp.file("in.jsonl")
        try putLines(0..<5, flow: flow).write(toFile: input, atomically: true, encoding: .utf8)
        for round in 0..<5 {
            let dir = tmp.file("cache-\(round)")
            // An empty directory, as a new volume's mount point is, every other round.
            if round % 2 == 0 {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            }
            let stderrs = (0..<6).map { _ in tmp.file("err-\(UUID().uuidString)") }
            let writers = stderrs.map { err -> Process in
                _ = FileManager.default.createFile(atPath: err, contents: nil)
                let p = Process()
                p.executableURL = URL(fileURLWithPath: Paths.fpctl)
                p.arguments = ["cache", "put", "--cache-dir", dir, "--input", input]
                p.standardOutput = FileHandle.nullDevice
                p.standardError = FileHandle(forWritingAtPath: err)
                try? p.run()
                return p
            }
            for (w, err) in zip(writers, stderrs) {
                w.waitUntilExit()
                #expect(
                    w.terminationStatus == 0,
                    "round \(round): \((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
            }
        }
    }

    @Test("verify and verify --repair beside a writer rewriting its keys: no false finding, nothing live removed")
    func verifyBesideWriter() throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("cache")
        let input = tmp.file("in.jsonl")
        // 200 keys rewritten 15 times over: every key's file is replaced again and again.
        try String(repeating: putLines(0..<200, flow: flow), count: 15)
            .write(toFile: input, atomically: true, encoding: .utf8)
        #expect(try fpctl("cache", "put", "--cache-dir", dir, "--input", input).status == 0)
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: Paths.fpctl)
        writer.arguments = ["cache", "put", "--cache-dir", dir, "--input", input]
        writer.standardOutput = FileHandle.nullDevice
        writer.standardError = FileHandle.nullDevice
        try writer.run()
        var verifies = 0
        while writer.isRunning || verifies < 2 {
            let repair = verifies % 2 == 1
            let r = try fpctl(["cache", "verify", "--cache-dir", dir] + (repair ? ["--repair"] : []))
            #expect(r.status == 0 && r.stdout == "ok\n", "verify\(repair ? " --repair" : ""): \(r.stdout.prefix(400))")
            verifies += 1
        }
        writer.waitUntilExit()
        #expect(writer.terminationStatus == 0)
        let list = try fpctl("cache", "list", "--cache-dir", dir, "--format", "csv")
        #expect(csvRows(list.stdout).count == 200, "a repair removed a live entry")
        #expect(try fpctl("cache", "info", "--cache-dir", dir, "--format", "json").stdout.contains(#""aliases":1"#))
    }

    @Test("two uids sharing a group volume with umask 002 (fsGroup): both warm, put and prune")
    func twoUIDs() throws {
        let tmp = try TemporaryDirectory()
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        // The binary and the flow where the other uids can read them; the volume owned by the group, setgid.
        let bin = tmp.file("fpctl")
        try FileManager.default.copyItem(atPath: Paths.fpctl, toPath: bin)
        let flowCopy = tmp.file("paywall.json")
        try FileManager.default.copyItem(atPath: flow, toPath: flowCopy)
        let volume = tmp.file("volume")
        try FileManager.default.createDirectory(atPath: volume, withIntermediateDirectories: true)
        #expect(chmod(tmp.path, 0o755) == 0 && chown(volume, 0, 4242) == 0 && chmod(volume, 0o2775) == 0)
        try putLines(0..<50, flow: flowCopy).write(toFile: tmp.file("in.jsonl"), atomically: true, encoding: .utf8)
        #expect(chmod(tmp.file("in.jsonl"), 0o644) == 0 && chmod(flowCopy, 0o644) == 0)
        let ids = try tmp.identities(50)
        #expect(chmod(ids, 0o644) == 0)
        func asUID(_ uid: Int, _ command: String) throws -> ProcessResult {
            try sh(
                "umask 002; exec setpriv --reuid \(uid) --regid 4242 --groups 4242 \(quote(bin)) \(command)",
                environment: ["HOME": "/"])
        }
        let cache = quote(volume + "/cache")
        let warm = "warm paywall --cache-dir \(cache) --api-url \(server.url) --app-id demo --media none"
        let a = try asUID(4101, "\(warm) --identities \(quote(ids))")
        #expect(a.status == 0, "\(a.stderr)")
        let b = try asUID(4102, "cache put --cache-dir \(cache) --input \(quote(tmp.file("in.jsonl")))")
        #expect(b.status == 0, "\(b.stderr)")
        let bWarm = try asUID(4102, "\(warm) --user-id other --environment development")
        #expect(bWarm.status == 0, "\(bWarm.stderr)")
        let aPrune = try asUID(4101, "cache prune --cache-dir \(cache) --user-id u3")
        #expect(aPrune.status == 0, "\(aPrune.stderr)")
        let bPrune = try asUID(4102, "cache prune --cache-dir \(cache) --older-than 0s")
        #expect(bPrune.status == 0, "\(bPrune.stderr)")
        #expect(
            try fpctl("cache", "list", "--cache-dir", volume + "/cache", "--format", "csv").stdout
                .split(separator: "\n").count == 1, "the second uid's prune left entries the first one wrote")
        var info = stat()
        #expect(stat(volume + "/cache/.lock", &info) == 0 && info.st_mode & 0o777 == 0o664)
    }
}
