import FlowPilotCore
import Foundation
import Synchronization
import Testing

/// What a finished process left: its exit status and everything it printed.
struct ProcessResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Locations every CLI test needs: the package root, the built fpctl binary.
enum Paths {
    static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("no Package.swift above \(#filePath)")
    }()

    /// The fpctl built beside this test bundle (FPCTL_BIN overrides).
    static let fpctl: String = {
        if let override = ProcessInfo.processInfo.environment["FPCTL_BIN"] { return override }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = dir.appendingPathComponent("fpctl").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir.deleteLastPathComponent()
        }
        return packageRoot.appendingPathComponent(".build/debug/fpctl").path
    }()

    static func sample(_ name: String) -> String {
        packageRoot.appendingPathComponent("bundles/\(name)").path
    }
}

/// Runs a program to completion (killed after `timeout` seconds: a hang is a failure).
@discardableResult
func run(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:],
    currentDirectory: String? = nil, timeout: TimeInterval = 120, stdinFile: String? = nil
) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env["NO_COLOR"] = "1"
    // Proxies and trust stores come from the test alone: a proxy set on the
    // machine must not take the tests' loopback requests elsewhere.
    for name in TransportSettings.variables { env[name] = nil }
    for (k, v) in environment { env[k] = v }
    process.environment = env
    if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
    let outFile = FileManager.default.temporaryDirectory.appendingPathComponent("fpctl-test-\(UUID().uuidString).out")
    let errFile = FileManager.default.temporaryDirectory.appendingPathComponent("fpctl-test-\(UUID().uuidString).err")
    _ = FileManager.default.createFile(atPath: outFile.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
    defer {
        try? FileManager.default.removeItem(at: outFile)
        try? FileManager.default.removeItem(at: errFile)
    }
    let outHandle = try FileHandle(forWritingTo: outFile)
    let errHandle = try FileHandle(forWritingTo: errFile)
    process.standardOutput = outHandle
    process.standardError = errHandle
    process.standardInput =
        try stdinFile.map { try FileHandle(forReadingFrom: URL(fileURLWithPath: $0)) }
        ?? FileHandle.nullDevice
    try process.run()
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning {
        if Date() > deadline {
            // SIGKILL: the test runner may have been started with SIGTERM ignored, which children inherit.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            Issue.record("\(executable) \(arguments.joined(separator: " ")) did not finish within \(Int(timeout))s")
            break
        }
        usleep(5_000)
    }
    process.waitUntilExit()
    try outHandle.close()
    try errHandle.close()
    return ProcessResult(
        status: process.terminationStatus,
        stdout: (try? String(contentsOf: outFile, encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOf: errFile, encoding: .utf8)) ?? "")
}

@discardableResult
func fpctl(_ arguments: String..., environment: [String: String] = [:], currentDirectory: String? = nil) throws
    -> ProcessResult
{
    try run(Paths.fpctl, arguments, environment: environment, currentDirectory: currentDirectory)
}

@discardableResult
func fpctl(_ arguments: [String], environment: [String: String] = [:], currentDirectory: String? = nil) throws
    -> ProcessResult
{
    try run(Paths.fpctl, arguments, environment: environment, currentDirectory: currentDirectory)
}

/// A fresh directory removed when the test's scope ends.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("fpctl-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    /// `ids-COUNT.jsonl` here: COUNT identities `u0`, `u1`, … a line each,
    /// with the attributes `attributes(i)` gives (none by default).
    func identities(_ count: Int, attributes: (Int) -> String = { _ in "{}" }) throws -> String {
        let path = file("ids-\(count).jsonl")
        try (0..<count).map { #"{"user_id":"u\#($0)","attributes":\#(attributes($0))}"# }
            .joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `fpctl bundle build` of the sample `name` into this directory, as `NAME.fpbundle`.
    func buildSample(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let bundle = file("\(name).fpbundle")
        let build = try fpctl("bundle", "build", Paths.sample(name), "-o", bundle)
        #expect(build.status == 0, "bundle build \(name): \(build.stderr)", sourceLocation: sourceLocation)
        return bundle
    }

    /// This directory is removed when the test process exits: for one held by a
    /// global (made once per run), which is never deinitialized.
    func removedAtExit() -> TemporaryDirectory {
        atExit.withLock { paths in
            if paths.isEmpty {
                atexit { for path in atExit.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) } }
            }
            paths.append(path)
        }
        return self
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

private let atExit = Mutex<[String]>([])

/// Stops a process a test started and waits for it to be gone, so that the
/// test's directory is not removed under it: SIGTERM, then SIGKILL after
/// `seconds`.
func stop(_ process: Process, within seconds: Double = 10) {
    guard process.isRunning else { return }
    process.terminate()
    let deadline = Date().addingTimeInterval(seconds)
    while process.isRunning && Date() < deadline { usleep(10_000) }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
}

/// The first line a started helper writes to `pipe`, without its newline
/// (what it says once it listens: a URL, `ready PORT`); "" when it ends first.
func firstLine(of pipe: Pipe) -> String {
    var line = Data()
    while !line.contains(0x0A) {
        let chunk = pipe.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        line.append(chunk)
    }
    return String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Finds a program on PATH (bsdtar, unzip, python3).
func which(_ program: String) -> String? {
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let candidate = "\(dir)/\(program)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

func tool(_ program: String) throws -> String {
    try #require(which(program), "\(program) is needed for this test (Scripts/test.sh installs it)")
}
