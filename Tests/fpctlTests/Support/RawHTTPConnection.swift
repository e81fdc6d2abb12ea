import Foundation

#if canImport(Glibc)
    import Glibc

    /// send(2), which the connection's own `send` hides.
    private let systemSend = Glibc.send
#elseif canImport(Darwin)
    import Darwin

    private let systemSend = Darwin.send
#endif

/// One TCP connection to a loopback server, written and read byte for byte: for
/// what an HTTP client library never does on purpose (pipelining several requests
/// in one write, sending a body in pieces, chunked bodies, not reading answers).
/// One task may read while another writes: the socket allows it, and only reads
/// touch the buffer.
final class RawHTTPConnection: @unchecked Sendable {
    struct Response {
        /// The status line and header lines as sent, without the blank line.
        let head: String
        let status: Int
        /// Header names lowercased.
        let headers: [String: String]
        let body: Data

        var text: String { String(decoding: body, as: UTF8.self) }
        var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    private let fd: Int32
    private var buffered = Data()
    /// The `Host` header `request` writes; a test may name another address.
    var hostHeader: String

    /// - Parameter receiveBuffer: SO_RCVBUF, set before connecting (a small one
    ///   stands for a client that reads slowly).
    init(_ url: String, receiveBuffer: Int32? = nil) throws {
        guard let port = URL(string: url)?.port else { throw Failure(description: "no port in \(url)") }
        hostHeader = "127.0.0.1:\(port)"
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure(description: "connect: errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// A request's bytes: request line, `Host`, the given headers, and a
    /// `Content-Length` body when `body` is given.
    func request(_ method: String, _ path: String, body: String? = nil, headers: [String] = []) -> Data {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\n"
        for header in headers { text += header + "\r\n" }
        if let body {
            text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
        } else {
            text += "\r\n"
        }
        return Data(text.utf8)
    }

    func send(_ data: Data) throws {
        var sent = 0
        while sent < data.count {
            let n = data.withUnsafeBytes { write(fd, $0.baseAddress! + sent, data.count - sent) }
            guard n > 0 else { throw Failure(description: "write: errno \(errno)") }
            sent += n
        }
    }

    func send(_ text: String) throws { try send(Data(text.utf8)) }

    /// Writes as much of `data` as the socket takes within `seconds`, never
    /// blocking on a peer that stopped reading; returns how many bytes went.
    func sendWhileAccepted(_ data: Data, seconds: Double) -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        var sent = 0
        while sent < data.count, Date() < deadline {
            let n = data.withUnsafeBytes {
                systemSend(fd, $0.baseAddress! + sent, data.count - sent, Int32(MSG_DONTWAIT))
            }
            if n > 0 { sent += n } else { usleep(10_000) }
        }
        return sent
    }

    /// Reads one response framed by `Content-Length`.
    func readResponse() throws -> Response {
        let headEnd = try readUntil(Data("\r\n\r\n".utf8))
        let head = String(decoding: buffered.prefix(headEnd), as: UTF8.self)
        buffered.removeFirst(headEnd + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw Failure(description: "bad status line in \(head)")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        guard let length = headers["content-length"].flatMap(Int.init) else {
            throw Failure(description: "no Content-Length in \(head)")
        }
        while buffered.count < length { try fill() }
        let body = buffered.prefix(length)
        buffered.removeFirst(length)
        return Response(head: head, status: status, headers: headers, body: Data(body))
    }

    /// Bytes read but not yet part of a whole response (after a failed `readResponse`,
    /// the body that did arrive).
    var unread: Data { buffered }

    /// Whether the server closed the connection: nothing more comes, once what
    /// was already read is used up.
    func closedByServer() throws -> Bool {
        guard buffered.isEmpty else { return false }
        var byte: UInt8 = 0
        let n = read(fd, &byte, 1)
        if n < 0 { throw Failure(description: "read: errno \(errno)") }
        if n == 1 { buffered.append(byte) }
        return n == 0
    }

    private func readUntil(_ marker: Data) throws -> Int {
        while true {
            if let range = buffered.range(of: marker) { return range.lowerBound - buffered.startIndex }
            try fill()
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = read(fd, &chunk, chunk.count)
        guard n > 0 else {
            throw Failure(description: n == 0 ? "connection closed by the server" : "read: errno \(errno)")
        }
        buffered.append(contentsOf: chunk[0..<n])
        buffered = Data(buffered)  // keep startIndex at 0
    }
}
