import Foundation
import FuzzSupport

@testable import FlowPilotCore

// The proxy settings as the variables and --proxy give them: lines of input are
// --proxy, HTTPS_PROXY, HTTP_PROXY, NO_PROXY and a host. Never a crash; a proxy
// that is accepted has a port a socket can use and shows no credentials; NO_PROXY
// matching ignores case, and a list that names a plain host matches it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxy(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let lines = String(decoding: Fuzz.bytes(start, count), as: UTF8.self)
        .split(separator: "\n", maxSplits: 4, omittingEmptySubsequences: false).map(String.init)
    func line(_ i: Int) -> String { i < lines.count ? lines[i] : "" }
    let environment = ["HTTPS_PROXY": line(1), "HTTP_PROXY": line(2), "NO_PROXY": line(3)]
    if let rules = try? ProxyRules(override: line(0).isEmpty ? nil : line(0), environment: environment) {
        for proxy in [rules.https, rules.http].compactMap({ $0 }) {
            Fuzz.check((1...65535).contains(proxy.port), "proxy port \(proxy.port)")
            // What messages show is made of the host and the port alone, so no
            // credential can reach it (a password may still look like a port:
            // Fuzz/Regressions/proxy/password-like-port).
            let expected = proxy.host.contains(":") ? "[\(proxy.host)]:\(proxy.port)" : "\(proxy.host):\(proxy.port)"
            Fuzz.check(proxy.description == expected, "description \(proxy.description) is not host:port")
            Fuzz.check(!proxy.host.contains("@"), "credentials in the host: \(proxy.host)")
        }
        _ = rules.proxy(for: "https://\(line(4))/v1")
    }
    let host = line(4)
    let list = NoProxy(line(3))
    let plain = !host.isEmpty && host.utf8.allSatisfy { $0 < 0x80 && $0 > 0x20 && $0 != UInt8(ascii: ",") }
    if plain {
        Fuzz.check(list.matches(host: host) == list.matches(host: host.uppercased()), "case changed a match: \(host)")
        let simple = host.first != "." && host.last != "." && !host.contains("/") && !host.contains("[")
        if simple {
            Fuzz.check(NoProxy(line(3) + "," + host).matches(host: host), "\(host) listed but not matched")
        }
    }
    Fuzz.check(NoProxy("*").matches(host: host), "* did not match \(host.debugDescription)")
    return 0
}
