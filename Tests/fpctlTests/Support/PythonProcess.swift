import Foundation

/// A Python script run for a test (a backend or a socket that misbehaves on
/// purpose) that prints one line, its loopback port, when it is ready; killed
/// with SIGKILL when the test is done (it inherits the test runner's ignored
/// SIGTERM).
final class PythonProcess {
    let process = Process()
    /// The first line the script printed.
    let port: String

    init(_ script: String, arguments: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: try tool("python3"))
        process.arguments = ["-c", script] + arguments
        let output = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        port = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
