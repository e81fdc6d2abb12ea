import Foundation
import Testing

@testable import FlowPilotCore

@Suite("proxy variables and NO_PROXY, read as curl reads them")
struct ProxyRulesTests {
    @Test(
        "NO_PROXY: names match themselves and every name under them, addresses and CIDR blocks match addresses, * matches all"
    )
    func noProxy() {
        let list = NoProxy(" Example.com, .internal.corp,10.0.0.0/8, ::1 ,192.168.1.7")
        for host in [
            "example.com", "api.EXAMPLE.com", "a.b.internal.corp", "internal.corp", "10.1.2.3", "[::1]", "192.168.1.7",
        ] {
            #expect(list.matches(host: host), "\(host) should bypass the proxy")
        }
        for host in ["notexample.com", "example.com.evil.net", "corp", "11.0.0.1", "192.168.1.8", "::2", "ample.com"] {
            #expect(!list.matches(host: host), "\(host) should go through the proxy")
        }
        #expect(NoProxy("*").matches(host: "anything.example"))
        #expect(!NoProxy("").matches(host: "localhost"))
        #expect(!NoProxy("10.0.0.0/33").matches(host: "10.0.0.1"), "an impossible prefix matches nothing")
    }

    @Test(
        "the variable for the URL's scheme, lowercase first, then ALL_PROXY; --proxy overrides them; NO_PROXY applies to both"
    )
    func choice() throws {
        let rules = try ProxyRules(
            override: nil,
            environment: [
                "https_proxy": "http://lower:3128", "HTTPS_PROXY": "http://upper:3128", "ALL_PROXY": "all.example",
                "NO_PROXY": "direct.example",
            ])
        #expect(rules.proxy(for: "https://api.example/v1")?.description == "lower:3128")
        #expect(rules.proxy(for: "http://cdn.example/a.png")?.description == "all.example:1080")
        #expect(rules.proxy(for: "https://direct.example/v1") == nil)
        let forced = try ProxyRules(
            override: "http://u:p%40ss@proxy.corp:8080", environment: ["NO_PROXY": "direct.example"])
        let proxy = try #require(forced.proxy(for: "http://cdn.example/a.png"))
        #expect(proxy.description == "proxy.corp:8080" && proxy.username == "u" && proxy.password == "p@ss")
        #expect(forced.proxy(for: "https://direct.example/") == nil)
    }

    @Test("a proxy shows only its host and port, even when the password looks like them (a fuzz find)")
    func credentialsHidden() throws {
        let input = try Data(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Fuzz/Regressions/proxy/password-like-port"))
        let override = String(decoding: input, as: UTF8.self).split(separator: "\n").first.map(String.init)
        let proxy = try #require(try ProxyRules(override: override, environment: [:]).https)
        #expect(
            proxy.description == "[\(proxy.host)]:\(proxy.port)" || proxy.description == "\(proxy.host):\(proxy.port)")
        #expect(!proxy.host.contains("@") && proxy.password != nil)
        let plain = try ProxyEndpoint(parsing: "http://alice:s3cr3t-pw@proxy.corp:3128", origin: "--proxy")
        #expect(plain.description == "proxy.corp:3128" && plain.password == "s3cr3t-pw")
    }

    @Test(
        "a proxy URL that is not http:// is refused with a usage error naming where it came from, without its password")
    func refused() {
        #expect(throws: FPError.self) { try ProxyRules(override: "https://proxy:443", environment: [:]) }
        do {
            _ = try ProxyRules(override: nil, environment: ["HTTPS_PROXY": "socks5://user:secret@proxy:1080"])
            Issue.record("a socks5 proxy was accepted")
        } catch let error as FPError {
            guard case .usage = error else {
                Issue.record("not a usage error: \(error)")
                return
            }
            #expect(error.description.hasPrefix("HTTPS_PROXY: socks5:// proxies are not supported"))
            #expect(!error.description.contains("secret"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        // Fuzz/Regressions/proxy/percent-encoded-host: a host that decodes to "@sa".
        for host in ["%40sa", "a%20b", "[zz::1]"] {
            #expect(throws: FPError.self, "\(host)") {
                try ProxyRules(override: "http://\(host):3128", environment: [:])
            }
        }
        for port in ["0", "65536", "99999"] {
            do {
                _ = try ProxyRules(override: "http://proxy.corp:\(port)", overrideName: "--proxy", environment: [:])
                Issue.record("port \(port) was accepted")
            } catch {
                #expect("\(error)" == "--proxy: port \(port) is out of range (1-65535)")
            }
        }
        do {
            _ = try ProxyRules(override: "http://user:secret@", environment: [:])
            Issue.record("a proxy URL without a host was accepted")
        } catch {
            #expect(!String(describing: error).contains("secret"), "\(error)")
        }
    }
}
