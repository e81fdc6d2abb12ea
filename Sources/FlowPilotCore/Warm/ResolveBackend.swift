import Foundation

/// A resolve backend as a caller describes it, before any client is made:
/// where it is, the key, the retries, the trust and proxy settings and the
/// request rate. Whoever knows how many requests will be in flight makes the
/// client (`client(connections:)`): a warm's options do
/// (`WarmRun.Options.client(for:mediaConcurrency:)`), from the concurrency
/// and the media concurrency the executable fitted and passes in.
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

extension WarmRun.Options {
    /// The client a run with these options needs to reach `backend`: as many
    /// HTTP connections per host as it keeps requests in flight
    /// (`connections(mediaConcurrency:)`: one batch request per identity
    /// resolving, one per placement without a batch endpoint, and the media
    /// downloads), so no request waits for one.
    public func client(for backend: ResolveBackend, mediaConcurrency: Int) throws -> ResolveClient {
        try backend.client(connections: connections(mediaConcurrency: mediaConcurrency))
    }
}
