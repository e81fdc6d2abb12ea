import Foundation

/// What every target shares: the input as bytes or text, a scratch file for the
/// readers that take a path, and a failed property that stops the fuzzer with
/// the input that broke it.
public enum Fuzz {
    public static func bytes(_ start: UnsafeRawPointer, _ count: Int) -> Data {
        Data(bytes: start, count: count)
    }

    /// A property of the code under test does not hold: abort, so libFuzzer
    /// writes the input as `crash-…`.
    public static func fail(_ message: String, file: StaticString = #file, line: UInt = #line) -> Never {
        FileHandle.standardError.write(Data("property failed: \(message) (\(file):\(line))\n".utf8))
        abort()
    }

    public static func check(
        _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
        file: StaticString = #file, line: UInt = #line
    ) {
        if !condition() { fail(message(), file: file, line: line) }
    }

    /// One file per process, rewritten for each input (readers that take a path).
    public static let scratchPath: String = {
        let dir = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        return "\(dir)/fpctl-fuzz-\(getpid())"
    }()

    public static func writeScratch(_ data: Data, suffix: String = "") -> String {
        let path = scratchPath + suffix
        guard FileManager.default.createFile(atPath: path, contents: data) else { fail("cannot write \(path)") }
        return path
    }

    /// The sample bundles (`bundles/` of the repository), found from this file's
    /// place in the source tree unless `FPCTL_FUZZ_BUNDLES` says otherwise.
    public static var bundlesDirectory: String {
        if let dir = ProcessInfo.processInfo.environment["FPCTL_FUZZ_BUNDLES"] { return dir }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent()  // FuzzSupport
            .deletingLastPathComponent()  // Sources
            .deletingLastPathComponent()  // Fuzz
            .deletingLastPathComponent()  // repository
            .appendingPathComponent("bundles").path
    }
}
