import Foundation

/// A resolve backend as a caller describes it, before any client is made:
/// where it is, the key, the retries, the trust and proxy settings and the
/// request rate. Whoever knows how many requests will be in flight makes the
/// client (`client(connections:)`): a warm's limits do
/// (`WarmLimits.client(for:)`), with the connections they keep in flight.
public struct ResolveBackend: Sendable {
    public var baseURL: String
    public var appID: String
    /// Never printed, logged or cached (`ResolveClient`).
    public var apiKey: String?
    public var retries: Int
    public var transport: TransportSettings
    public var rate: RequestPacer.Rate?

    public init(
        baseURL: String, appID: String, apiKey: String?, retries: Int = 2,
        transport: TransportSettings = TransportSettings(), rate: RequestPacer.Rate? = nil
    ) {
        (self.baseURL, self.appID, self.apiKey) = (baseURL, appID, apiKey)
        (self.retries, self.transport, self.rate) = (max(0, retries), transport, rate)
    }

    /// The client, keeping `connections` HTTP/1.1 connections per host (nil:
    /// the transport's default). Throws the transport's one-line errors (a
    /// `--cacert` file without a certificate, a trust store that cannot be
    /// read for an https:// backend).
    public func client(connections: Int? = nil) throws -> ResolveClient {
        var settings = transport
        if let connections { settings.connectionsPerHost = max(1, connections) }
        let transport = try HTTPTransport.make(settings)
        try transport.requireTrust(for: baseURL)
        return ResolveClient(
            baseURL: baseURL, appID: appID, apiKey: apiKey, retries: retries, transport: transport,
            pacer: RequestPacer(rate: rate))
    }
}
