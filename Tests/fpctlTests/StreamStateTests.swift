import Foundation
import Testing

/// Standard output and error in the states a pipeline leaves them: a reader
/// that went away, a full device, a closed descriptor. Never a crash: a
/// vanished reader ends fpctl quietly by SIGPIPE (as `cat`), any other failed
/// write is one line and status 73, and a closed standard error changes no status.
@Suite("standard output and error: broken pipe, full, closed")
struct StreamStateTests {
    /// Commands that print to standard output.
    static let names = [
        "bundle validate", "bundle validate --format json", "bundle inspect", "bundle build", "bundle preview",
        "bundle keygen", "bundle sign", "cache info", "cache list", "cache list --images", "cache verify",
        "cache prune", "report", "resolve", "resolve --format json", "warm", "--help", "--version",
    ]

    /// A directory with the demo bundle and a cache with one entry.
    func prepared() throws -> (TemporaryDirectory, String) {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let input = tmp.file("in.jsonl")
        try writePutLine(input)
        #expect(try fpctl("cache", "put", "--cache-dir", tmp.file("cache"), "--input", input).status == 0)
        #expect(try fpctl("bundle", "keygen", "-o", tmp.file("signing")).status == 0)
        let warm = try fpctl(warmArguments(tmp, bundle) + ["--format", "json"])
        try warm.stdout.write(toFile: tmp.file("warm.json"), atomically: true, encoding: .utf8)
        return (tmp, bundle)
    }

    /// A warm served by the bundle: nobody listens at the backend's address.
    func warmArguments(_ tmp: TemporaryDirectory, _ bundle: String) -> [String] {
        [
            "warm", "paywall", "onboarding", "--user-id", "u", "--api-url", "http://127.0.0.1:9", "--app-id", "demo",
            "--bundle", bundle, "--cache-dir", tmp.file("warm-cache"),
        ]
    }

    /// The command `name` with what it needs from `tmp` and the demo `bundle`.
    func arguments(_ name: String, _ tmp: TemporaryDirectory, _ bundle: String) -> [String] {
        switch name {
        case "bundle validate": ["bundle", "validate", bundle]
        case "bundle validate --format json": ["bundle", "validate", bundle, "--format", "json"]
        case "bundle sign":
            ["bundle", "sign", bundle, "--key", tmp.file("signing.key"), "-o", tmp.file("signed-\(UUID())")]
        case "cache list --images": ["cache", "list", "--cache-dir", tmp.file("cache"), "--images"]
        case "cache verify": ["cache", "verify", "--cache-dir", tmp.file("cache")]
        case "cache prune": ["cache", "prune", "--cache-dir", tmp.file("cache"), "--older-than", "1000d"]
        case "report": ["report", tmp.file("warm.json")]
        case "resolve", "resolve --format json":
            [
                "resolve", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--bundle", bundle,
                "--cache-dir", tmp.file("resolve-cache"),
            ] + (name.hasSuffix("json") ? ["--format", "json"] : [])
        case "warm": warmArguments(tmp, bundle)
        case "--version": ["--version"]
        case "bundle inspect": ["bundle", "inspect", bundle, "--format", "json"]
        case "bundle build": ["bundle", "build", Paths.sample("demo"), "-o", tmp.file("out.fpbundle")]
        case "bundle preview": ["bundle", "preview", bundle]
        case "bundle keygen": ["bundle", "keygen", "-o", tmp.file("release-\(UUID())")]
        case "cache info": ["cache", "info", "--cache-dir", tmp.file("cache")]
        case "cache list": ["cache", "list", "--cache-dir", tmp.file("cache"), "--format", "csv"]
        default: ["--help"]
        }
    }

    /// Runs fpctl with standard output on `stdout` and standard error captured.
    func runWith(stdout: FileHandle, _ arguments: [String]) throws -> (Process, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Paths.fpctl)
        process.arguments = arguments
        let errors = Pipe()
        process.standardOutput = stdout
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process, text)
    }

    @Test("a reader that went away: ended by SIGPIPE, nothing printed", arguments: names)
    func brokenPipe(name: String) throws {
        let (tmp, bundle) = try prepared()
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        let (process, errors) = try runWith(stdout: pipe.fileHandleForWriting, arguments(name, tmp, bundle))
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGPIPE, "\(errors)")
        #expect(errors.isEmpty, "\(errors)")
    }

    @Test("a full device: one line naming standard output, status 73", arguments: names)
    func full(name: String) throws {
        let (tmp, bundle) = try prepared()
        let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
        let (process, errors) = try runWith(stdout: full, arguments(name, tmp, bundle))
        #expect(process.terminationReason == .exit && process.terminationStatus == 73, "\(errors)")
        #expect(errors == "fpctl: error: standard output: No space left on device (ENOSPC)\n")
    }

    @Test("a closed standard output: one line, status 73; a closed standard error: the same status as ever")
    func closed() throws {
        let (tmp, bundle) = try prepared()
        let sh = try tool("sh")
        for name in Self.names {
            let args = arguments(name, tmp, bundle).map { "'\($0)'" }.joined(separator: " ")
            let r = try run(sh, ["-c", "exec '\(Paths.fpctl)' \(args) >&-"])
            #expect(r.status == 73, "\(name): \(r.stderr)")
            #expect(r.stderr == "fpctl: error: standard output: Bad file descriptor (EBADF)\n", "\(name)")
        }
        // What the command wrote before its report failed is whole.
        #expect(try fpctl("bundle", "validate", tmp.file("out.fpbundle")).status == 0)
        // Standard error closed: the status is the command's own.
        let missing = try run(sh, ["-c", "exec '\(Paths.fpctl)' bundle validate '\(tmp.file("none"))' 2>&-"])
        #expect(missing.status == 66)
        let valid = try run(sh, ["-c", "exec '\(Paths.fpctl)' bundle validate '\(bundle)' 2>&-"])
        #expect(valid.status == 0 && valid.stdout.contains(": ok "))
    }

    @Test("a full standard error: what the command printed is dropped, its status is its own (0)", arguments: names)
    func fullStandardError(name: String) throws {
        let (tmp, bundle) = try prepared()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Paths.fpctl)
        process.arguments = arguments(name, tmp, bundle)
        let output = Pipe()
        process.standardOutput = output
        let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
        process.standardError = full
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(name)")
        #expect(!printed.isEmpty, "\(name) printed nothing on standard output")
    }

    @Test("warm, whose HTTP client ignores SIGPIPE: a vanished reader still ends it quietly, a full device is 73")
    func warm() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let tmp = try TemporaryDirectory()
        let ids = (0..<300).map { #"{"user_id":"u-\#($0)"}"# }.joined(separator: "\n") + "\n"
        try ids.write(toFile: tmp.file("ids.jsonl"), atomically: true, encoding: .utf8)
        func arguments(_ format: String) -> [String] {
            [
                "warm", "paywall", "--api-url", server.url, "--app-id", "demo", "--identities", tmp.file("ids.jsonl"),
                "--cache-dir", tmp.file("cache"), "--media", "none", "--format", format,
            ]
        }
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        let (broken, brokenErrors) = try runWith(stdout: pipe.fileHandleForWriting, arguments("table"))
        #expect(broken.terminationReason == .uncaughtSignal && broken.terminationStatus == SIGPIPE, "\(brokenErrors)")
        #expect(!brokenErrors.contains("Fatal error") && !brokenErrors.contains("Backtrace"), "\(brokenErrors)")
        for format in ["csv", "json"] {
            let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
            let (process, errors) = try runWith(stdout: full, arguments(format))
            #expect(process.terminationReason == .exit && process.terminationStatus == 73, "\(format): \(errors)")
            #expect(errors.hasSuffix("fpctl: error: standard output: No space left on device (ENOSPC)\n"), "\(errors)")
        }
        #expect(try fpctl("cache", "verify", "--cache-dir", tmp.file("cache")).status == 0)
    }
}
