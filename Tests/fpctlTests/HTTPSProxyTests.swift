import Foundation
import Testing

/// warm, resolve and bundle pull against a backend behind nginx's TLS and through
/// tinyproxy, all on loopback (TLSBackend): private CAs, certificate failures and
/// proxies, as docs/https.md describes them.
@Suite("HTTPS, private CAs and proxies, against nginx and tinyproxy on loopback")
struct HTTPSProxyTests {
    static let key = "k_https_secret_7f3a"

    struct Row {
        let state: String
        let source: String
        let error: String
    }

    /// `fpctl warm paywall onboarding` into a fresh cache, CSV rows parsed.
    func warm(_ url: String, _ extra: [String] = [], environment: [String: String] = [:]) throws -> (
        result: ProcessResult, rows: [Row]
    ) {
        let cache = try TemporaryDirectory()
        let result = try fpctl(
            [
                "warm", "paywall", "onboarding", "--cache-dir", cache.path, "--api-url", url, "--app-id", "demo",
                "--format", "csv", "--retries", "0",
            ] + extra,
            environment: environment.merging(["FLOWPILOT_API_KEY": Self.key]) { a, _ in a })
        let rows = result.stdout.split(separator: "\n").dropFirst().map { line in
            let fields = line.split(separator: ",", maxSplits: 10, omittingEmptySubsequences: false).map(String.init)
            return Row(state: fields[2], source: fields[4], error: fields.count > 10 ? fields[10] : "")
        }
        #expect(!(result.stdout + result.stderr).contains(Self.key), "the API key was printed")
        return (result, rows)
    }

    @Test(
        "a private CA is trusted with --cacert or SSL_CERT_FILE; an untrusted or mismatched certificate fails every row with tls, exit 69"
    )
    func privateCA() throws {
        let backend = try TLSBackend()

        let trusted = try warm(backend.url, ["--cacert", backend.caFile])
        #expect(trusted.result.status == 0, "\(trusted.result.stderr)")
        #expect(trusted.rows.count == 2 && trusted.rows.allSatisfy { $0.state == "warmed" && $0.source == "network" })

        // SSL_CERT_FILE replaces the system's store, as curl and OpenSSL read it.
        let fromEnvironment = try warm(backend.url, environment: ["SSL_CERT_FILE": backend.caFile])
        #expect(fromEnvironment.result.status == 0, "\(fromEnvironment.result.stderr)")
        #expect(fromEnvironment.rows.allSatisfy { $0.state == "warmed" })

        let untrusted = try warm(backend.url)
        #expect(untrusted.result.status == 69)
        #expect(untrusted.rows.count == 2)
        #expect(
            untrusted.rows.allSatisfy {
                $0.state == "failed" && $0.error.hasPrefix("tls: handshake failed: the certificate is not trusted")
            }, "\(untrusted.result.stdout)")
        let errors = untrusted.result.stderr.split(separator: "\n").filter { $0.hasPrefix("fpctl: error:") }
        #expect(
            errors.count == 1 && errors[0].hasPrefix("fpctl: error: no request reached the backend: tls: "),
            "\(untrusted.result.stderr)")
        // The hint names the command line's flag where a person reads it (standard error, the table and
        // CSV rows); the library's message, which the JSON output carries, does not.
        #expect(errors.first?.hasSuffix("(CERTIFICATE_VERIFY_FAILED) (trust its CA with --cacert)") == true)
        #expect(untrusted.rows.allSatisfy { $0.error.hasSuffix("(trust its CA with --cacert)") })

        let mismatched = try warm(backend.wrongNameURL, ["--cacert", backend.caFile])
        #expect(mismatched.result.status == 69)
        #expect(
            mismatched.rows.allSatisfy { $0.error == "tls: the certificate does not match the host name" },
            "\(mismatched.result.stdout)")

        // Plain HTTP spoken to a TLS client is a tls failure too, not a hang.
        let plain = try warm(backend.serve.url.replacingOccurrences(of: "http://", with: "https://"))
        #expect(plain.result.status == 69)
        #expect(plain.rows.allSatisfy { $0.error.hasPrefix("tls: ") }, "\(plain.result.stdout)")
    }

    @Test("a CA file that is missing or holds no certificate is a one-line error naming it, before any request")
    func badCAFile() throws {
        let backend = try TLSBackend()
        let missing = try warm(backend.url, ["--cacert", backend.dir.file("nope.pem")])
        #expect(missing.result.status == 66)
        #expect(
            missing.result.stderr == "fpctl: error: --cacert \(backend.dir.file("nope.pem")): no such CA file\n")
        let notPEM = backend.dir.file("server.ext")
        let garbage = try warm(backend.url, ["--cacert", notPEM])
        #expect(garbage.result.status == 65)
        #expect(garbage.result.stderr.split(separator: "\n").count == 1, "\(garbage.result.stderr)")
        #expect(garbage.result.stderr.contains(notPEM) && garbage.result.stderr.contains("no PEM certificate"))
        let missingFromEnvironment = try warm(backend.url, environment: ["SSL_CERT_FILE": backend.dir.file("nope.pem")])
        #expect(missingFromEnvironment.result.status == 66, "\(missingFromEnvironment.result.stderr)")
        #expect(
            missingFromEnvironment.result.stderr
                == "fpctl: error: SSL_CERT_FILE \(backend.dir.file("nope.pem")): cannot read the file\n")
    }

    @Test(
        "a missing SSL_CERT_FILE or SSL_CERT_DIR stops only what needs TLS: a plain http:// backend warms, as in curl"
    )
    func trustStoreOnlyForTLS() throws {
        let backend = try TLSBackend()
        for variable in ["SSL_CERT_FILE", "SSL_CERT_DIR"] {
            let plain = try warm(backend.serve.url, environment: [variable: backend.dir.file("nope")])
            #expect(plain.result.status == 0, "\(variable): \(plain.result.stderr)")
            #expect(plain.rows.count == 2 && plain.rows.allSatisfy { $0.state == "warmed" }, "\(plain.result.stdout)")
            let tls = try warm(backend.url, environment: [variable: backend.dir.file("nope")])
            #expect(tls.result.status == 66, "\(variable): \(tls.result.stderr)")
            #expect(tls.result.stderr.hasPrefix("fpctl: error: \(variable) \(backend.dir.file("nope")): "))
        }
    }

    @Test(
        "HTTPS_PROXY tunnels with CONNECT (the proxy logs it, never the key); NO_PROXY bypasses it; --proxy overrides it; a refusing or dead proxy is error proxy"
    )
    func proxies() throws {
        let backend = try TLSBackend()
        let port = try #require(URL(string: backend.url)?.port)
        let dead = "http://127.0.0.1:\(freePort())"

        let tunnelled = try warm(
            backend.url, ["--cacert", backend.caFile], environment: ["HTTPS_PROXY": backend.proxy])
        #expect(tunnelled.result.status == 0, "\(tunnelled.result.stderr)")
        #expect(tunnelled.rows.allSatisfy { $0.state == "warmed" })
        #expect(backend.proxyLog.contains("CONNECT 127.0.0.1:\(port) HTTP/1.1"), "\(backend.proxyLog)")
        #expect(!backend.proxyLog.contains(Self.key))

        // The lowercase variable wins over the uppercase one, as in curl.
        let lowercase = try warm(
            backend.url, ["--cacert", backend.caFile], environment: ["https_proxy": dead, "HTTPS_PROXY": backend.proxy])
        #expect(lowercase.result.status == 69)
        #expect(lowercase.rows.allSatisfy { $0.error.hasPrefix("proxy: cannot connect to the proxy 127.0.0.1:") })

        let bypassed = try warm(
            backend.url, ["--cacert", backend.caFile],
            environment: ["HTTPS_PROXY": dead, "NO_PROXY": "localhost,127.0.0.1"])
        #expect(bypassed.result.status == 0, "\(bypassed.result.stdout)")

        let refused = try warm(
            backend.url, ["--cacert", backend.caFile, "--proxy", backend.refusingProxy],
            environment: ["HTTPS_PROXY": backend.proxy])
        #expect(refused.result.status == 69)
        let refusingPort = try #require(URL(string: backend.refusingProxy)?.port)
        #expect(
            refused.rows.allSatisfy { $0.error == "proxy: the proxy 127.0.0.1:\(refusingPort) refused the request" },
            "\(refused.result.stdout)")

        let unsupported = try warm(backend.url, ["--proxy", "socks5://127.0.0.1:1080"])
        #expect(unsupported.result.status == 64)
        #expect(unsupported.result.stderr.hasPrefix("fpctl: error: --proxy: socks5:// proxies are not supported"))
    }

    @Test(
        "bundle pull and resolve over HTTPS through the proxy: flows and media (plain http://) both tunnelled with CONNECT"
    )
    func pullThroughProxy() throws {
        let backend = try TLSBackend(rewriteAssetURLs: true)
        let out = try TemporaryDirectory()
        let env = ["FLOWPILOT_API_KEY": Self.key, "HTTPS_PROXY": backend.proxy, "HTTP_PROXY": backend.proxy]
        let pull = try fpctl(
            [
                "bundle", "pull", "paywall", "onboarding", "--api-url", backend.url, "--app-id", "demo", "--cacert",
                backend.caFile, "-o", out.file("src"),
            ], environment: env)
        #expect(pull.status == 0, "\(pull.stderr)")
        let built = try fpctl("bundle", "build", out.file("src"), "-o", out.file("pulled.fpbundle"))
        #expect(built.status == 0, "\(built.stderr)")
        let upstream = try #require(URL(string: backend.serve.url)?.port)
        // AsyncHTTPClient tunnels plain http:// through a proxy with CONNECT too.
        #expect(
            backend.proxyLog.contains("CONNECT 127.0.0.1:\(upstream) HTTP/1.1"), "media did not go through the proxy")
        #expect(!backend.proxyLog.contains(Self.key))

        let resolved = try fpctl(
            [
                "resolve", "paywall", "--cache-dir", out.file("cache"), "--api-url", backend.url, "--app-id", "demo",
                "--cacert", backend.caFile,
            ], environment: env)
        #expect(resolved.status == 0, "\(resolved.stderr)")
        #expect(!(resolved.stdout + resolved.stderr + pull.stdout + pull.stderr).contains(Self.key))
    }
}
