import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// `fpctl serve --port 0` started as a real process for a test, stopped with
/// SIGTERM when the test is done. Requests go over real HTTP on loopback.
final class ServeProcess: @unchecked Sendable {
    let process = Process()
    let url: String
    private let stderrFile: URL

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: Paths.fpctl)
        process.arguments = ["serve", "--port", "0"] + arguments
        let out = Pipe()
        stderrFile = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // The first stdout line is the URL; a server that never says it is killed.
        let watchdog = DispatchWorkItem { [process] in if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: watchdog)
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        watchdog.cancel()
        url = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard url.hasPrefix("http://") else {
            process.waitUntilExit()
            throw ServeError(message: "serve did not start: \(stderr)")
        }
    }

    struct ServeError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    var stderr: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    /// Sends SIGTERM (or `signal`) and returns the exit status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: stderrFile)
    }
}

struct HTTPResult {
    let status: Int
    let headers: HTTPHeaders
    let body: Data

    var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A real HTTP request with AsyncHTTPClient.
func http(
    _ method: HTTPMethod, _ url: String, json: Any? = nil, body: Data? = nil,
    headers: [(String, String)] = []
) async throws -> HTTPResult {
    var request = HTTPClientRequest(url: url)
    request.method = method
    for (k, v) in headers { request.headers.add(name: k, value: v) }
    if let json {
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
    } else if let body {
        request.body = .bytes(ByteBuffer(bytes: body))
    }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(20))
    let bytes = try await response.body.collect(upTo: 64 << 20)
    return HTTPResult(status: Int(response.status.code), headers: response.headers, body: Data(bytes.readableBytesView))
}

func resolve(
    _ server: ServeProcess, app: String = "demo", _ placement: String, user: String = "u1",
    attributes: [String: Any] = [:], headers: [(String, String)] = []
) async throws -> HTTPResult {
    try await http(
        .POST, "\(server.url)/apps/\(app)/placements/\(placement)/resolve",
        json: ["user_id": user, "attributes": attributes], headers: headers)
}

func flowID(_ result: HTTPResult) -> String? {
    (result.json?["flow"] as? [String: Any])?["id"] as? String
}
