import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A production-shaped backend on loopback, from real parts: `fpctl serve` behind
/// nginx terminating TLS with certificates from a CA made for the test (openssl),
/// and two tinyproxy forward proxies, one that tunnels and one that refuses
/// every CONNECT. Every process is stopped when the value goes away.
final class TLSBackend: @unchecked Sendable {
    let dir: TemporaryDirectory
    let serve: ServeProcess
    /// https://127.0.0.1:PORT with a certificate for 127.0.0.1 signed by `caFile`.
    let url: String
    /// The same server under a certificate for wrong.example, from the same CA.
    let wrongNameURL: String
    /// A proxy that tunnels (CONNECT) to any port, logging every request to `proxyLog`.
    let proxy: String
    /// A proxy that refuses CONNECT to anything but port 443.
    let refusingProxy: String
    private var processes: [Process] = []

    var caFile: String { dir.file("ca.pem") }
    var proxyLog: String { (try? String(contentsOfFile: dir.file("proxy.log"), encoding: .utf8)) ?? "" }

    init(rewriteAssetURLs: Bool = false) throws {
        dir = try TemporaryDirectory()
        serve = try ServeProcess([Paths.sample("demo"), "-q"] + (rewriteAssetURLs ? ["--rewrite-asset-urls"] : []))
        let (good, wrong, open, refusing) = (freePort(), freePort(), freePort(), freePort())
        url = "https://127.0.0.1:\(good)"
        wrongNameURL = "https://127.0.0.1:\(wrong)"
        proxy = "http://127.0.0.1:\(open)"
        refusingProxy = "http://127.0.0.1:\(refusing)"
        try makeCertificates()
        try startNginx(good: good, wrong: wrong)
        try startTinyproxy(port: open, name: "proxy", extra: "")
        try startTinyproxy(port: refusing, name: "refusing", extra: "ConnectPort 443\n")
        for port in [good, wrong, open, refusing] { try waitForPort(port) }
    }

    deinit {
        // SIGKILL: nginx without its master process and tinyproxy in the
        // foreground may inherit SIGTERM blocked from the test runner's thread.
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    private func makeCertificates() throws {
        let openssl = try tool("openssl")
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try check(
            openssl,
            ["req", "-x509"] + key + [
                "-keyout", dir.file("ca.key"), "-out", dir.file("ca.pem"), "-days", "2", "-subj", "/CN=fpctl test CA",
            ])
        try check(
            openssl,
            ["req"] + key + [
                "-keyout", dir.file("server.key"), "-out", dir.file("server.csr"), "-subj", "/CN=127.0.0.1",
            ])
        for (name, san) in [("server", "IP:127.0.0.1,DNS:localhost"), ("wrong", "DNS:wrong.example")] {
            try "subjectAltName=\(san)\n".write(toFile: dir.file("\(name).ext"), atomically: true, encoding: .utf8)
            try check(
                openssl,
                [
                    "x509", "-req", "-in", dir.file("server.csr"), "-CA", dir.file("ca.pem"), "-CAkey",
                    dir.file("ca.key"), "-CAcreateserial", "-out", dir.file("\(name).pem"), "-days", "2",
                    "-extfile", dir.file("\(name).ext"),
                ])
        }
    }

    private func startNginx(good: Int, wrong: Int) throws {
        let upstream = try #require(URL(string: serve.url)?.port)
        let temp = dir.file("nginx-temp")
        try FileManager.default.createDirectory(atPath: temp, withIntermediateDirectories: true)
        func server(_ port: Int, _ certificate: String) -> String {
            """
                server {
                    listen 127.0.0.1:\(port) ssl;
                    ssl_certificate \(dir.file("\(certificate).pem"));
                    ssl_certificate_key \(dir.file("server.key"));
                    location / { proxy_pass http://127.0.0.1:\(upstream); }
                }
            """
        }
        let conf = """
            worker_processes 1;
            daemon off;
            master_process off;
            pid \(dir.file("nginx.pid"));
            error_log \(dir.file("nginx-error.log"));
            events { worker_connections 64; }
            http {
                access_log off;
                client_body_temp_path \(temp); proxy_temp_path \(temp); fastcgi_temp_path \(temp);
                uwsgi_temp_path \(temp); scgi_temp_path \(temp);
            \(server(good, "server"))
            \(server(wrong, "wrong"))
            }
            """
        try conf.write(toFile: dir.file("nginx.conf"), atomically: true, encoding: .utf8)
        try start(try tool("nginx"), ["-c", dir.file("nginx.conf"), "-p", dir.path, "-e", dir.file("nginx-error.log")])
    }

    private func startTinyproxy(port: Int, name: String, extra: String) throws {
        let conf = """
            Port \(port)
            Listen 127.0.0.1
            Timeout 30
            MaxClients 32
            Allow 127.0.0.1
            LogFile "\(dir.file("\(name).log"))"
            LogLevel Connect
            PidFile "\(dir.file("\(name).pid"))"
            \(extra)
            """
        try conf.write(toFile: dir.file("\(name).conf"), atomically: true, encoding: .utf8)
        try start(try tool("tinyproxy"), ["-d", "-c", dir.file("\(name).conf")])
    }

    private func start(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        processes.append(process)
    }

    private func check(_ executable: String, _ arguments: [String]) throws {
        let result = try run(executable, arguments)
        try #require(result.status == 0, "\(executable) \(arguments.joined(separator: " ")): \(result.stderr)")
    }
}

/// A loopback port nothing listens on right now.
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            _ = bind(fd, pointer, length)
            return getsockname(fd, pointer, &length)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Waits (up to 10 s) until something accepts connections on a loopback port.
func waitForPort(_ port: Int) throws {
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        close(fd)
        if connected == 0 { return }
        usleep(20_000)
    }
    Issue.record("nothing listens on 127.0.0.1:\(port) after 10 s")
}
