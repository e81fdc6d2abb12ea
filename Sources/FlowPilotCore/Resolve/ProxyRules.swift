import Foundation

/// An HTTP forward proxy: `http://[user:password@]host[:port]` (port 1080 when
/// none is given, as curl does). The credentials go into `Proxy-Authorization`
/// only; `description` never shows them.
public struct ProxyEndpoint: Sendable, Hashable, CustomStringConvertible {
    public let host: String
    public let port: Int
    let username: String?
    let password: String?

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Parses a proxy URL as curl reads one: no scheme means `http://`. `origin`
    /// names where the value came from (`--proxy`, `HTTPS_PROXY`) for the error.
    public init(parsing text: String, origin: String) throws {
        let withScheme = text.contains("://") ? text : "http://\(text)"
        guard let parts = URLComponents(string: withScheme), let scheme = parts.scheme?.lowercased(),
            let host = parts.host, !host.isEmpty
        else {
            throw FPError.usage("\(origin): \(Self.redacted(text)) is not a proxy URL (use http://host:port)")
        }
        guard scheme == "http" else {
            throw FPError.usage(
                "\(origin): \(scheme):// proxies are not supported (use an http:// proxy; it tunnels HTTPS with CONNECT)"
            )
        }
        guard parts.path.isEmpty || parts.path == "/", parts.query == nil else {
            throw FPError.usage("\(origin): a proxy URL has no path (use http://host:port)")
        }
        let port = parts.port ?? 1080
        guard (1...65535).contains(port) else {
            throw FPError.usage("\(origin): port \(port) is out of range (1-65535)")
        }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard Self.isHostName(bare) else {
            throw FPError.usage("\(origin): \(Self.redacted(text)): the proxy host is not a host name or an address")
        }
        self.host = bare
        self.port = port
        self.username = parts.percentEncodedUser.flatMap { $0.removingPercentEncoding }
        self.password = parts.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
    }

    /// Letters, digits, `-`, `_` and `.`, or an IPv6 address: what a socket can
    /// connect to (a percent-encoded host such as `%40sa` decodes to `@sa`).
    static func isHostName(_ host: String) -> Bool {
        if host.contains(":") { return IPAddress(host) != nil }
        return !host.isEmpty && host.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-._".contains($0)) }
    }

    /// The URL without its credentials, for messages.
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        return at > start ? text.replacingCharacters(in: start..<at, with: "***") : text
    }
}

/// `NO_PROXY` as curl reads it: names and addresses separated by commas; `*`
/// alone matches every host; `example.com` and `.example.com` match that host
/// and every name under it; an IPv4 or IPv6 address matches itself, and a CIDR
/// block (`10.0.0.0/8`, `fd00::/8`) every address in it. Case does not matter.
public struct NoProxy: Sendable, Hashable {
    let entries: [String]

    public init(_ list: String) {
        entries = list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
            .map { $0.lowercased() }
            .filter { !$0.isEmpty }
    }

    public func matches(host rawHost: String) -> Bool {
        var host = rawHost.lowercased()
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.hasSuffix(".") { host.removeLast() }
        let address = IPAddress(host)
        for var entry in entries {
            if entry == "*" { return true }
            if entry.hasPrefix("[") && entry.hasSuffix("]") { entry = String(entry.dropFirst().dropLast()) }
            if let address {
                if let block = IPBlock(entry), block.contains(address) { return true }
                continue
            }
            while entry.hasPrefix(".") { entry.removeFirst() }
            if entry.isEmpty { continue }
            if host == entry || host.hasSuffix("." + entry) { return true }
        }
        return false
    }
}

/// An IPv4 or IPv6 address as bytes.
struct IPAddress: Equatable {
    let bytes: [UInt8]

    init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            return nil
        }
    }
}

/// An address with an optional prefix length: `10.0.0.0/8`, `::1`.
struct IPBlock {
    let base: IPAddress
    let bits: Int

    init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let base = parts.first.flatMap(IPAddress.init) else { return nil }
        let width = base.bytes.count * 8
        if parts.count == 2 {
            guard let bits = Int(parts[1]), (0...width).contains(bits) else { return nil }
            self.bits = bits
        } else {
            self.bits = width
        }
        self.base = base
    }

    func contains(_ address: IPAddress) -> Bool {
        guard address.bytes.count == base.bytes.count else { return false }
        var left = bits
        for (a, b) in zip(address.bytes, base.bytes) where left > 0 {
            let take = min(8, left)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if a & mask != b & mask { return false }
            left -= take
        }
        return true
    }
}

/// Which proxy, if any, a URL goes through: `--proxy`, else the variables curl
/// reads (`https_proxy`/`HTTPS_PROXY` for https URLs, `http_proxy`/`HTTP_PROXY`
/// for http ones, then `all_proxy`/`ALL_PROXY`; lowercase first), except for
/// hosts `NO_PROXY`/`no_proxy` names. docs/https.md has the rules.
public struct ProxyRules: Sendable, Hashable {
    let https: ProxyEndpoint?
    let http: ProxyEndpoint?
    let noProxy: NoProxy

    /// The variables read, in the order they are looked at.
    public static let variables = [
        "https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
    ]

    public static let none = ProxyRules(https: nil, http: nil, noProxy: NoProxy(""))

    init(https: ProxyEndpoint?, http: ProxyEndpoint?, noProxy: NoProxy) {
        self.https = https
        self.http = http
        self.noProxy = noProxy
    }

    /// `override` (called `overrideName` in messages) wins over the variables.
    public init(override: String?, overrideName: String = "proxy", environment: [String: String]) throws {
        func first(_ names: String...) -> (name: String, value: String)? {
            for name in names { if let value = environment[name], !value.isEmpty { return (name, value) } }
            return nil
        }
        func endpoint(_ found: (name: String, value: String)?) throws -> ProxyEndpoint? {
            try found.map { try ProxyEndpoint(parsing: $0.value, origin: $0.name) }
        }
        if let override, !override.isEmpty {
            let proxy = try ProxyEndpoint(parsing: override, origin: overrideName)
            https = proxy
            http = proxy
        } else {
            let all = first("all_proxy", "ALL_PROXY")
            https = try endpoint(first("https_proxy", "HTTPS_PROXY") ?? all)
            http = try endpoint(first("http_proxy", "HTTP_PROXY") ?? all)
        }
        noProxy = NoProxy(first("no_proxy", "NO_PROXY")?.value ?? "")
    }

    /// The proxy for `url`, or nil to connect directly.
    public func proxy(for url: String) -> ProxyEndpoint? {
        // Every request asks; without a proxy there is no URL to parse.
        guard https != nil || http != nil, let parts = URLComponents(string: url), let host = parts.host else {
            return nil
        }
        let proxy = parts.scheme?.lowercased() == "https" ? https : http
        guard let proxy, !noProxy.matches(host: host) else { return nil }
        return proxy
    }
}
