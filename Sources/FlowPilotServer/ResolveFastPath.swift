import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Answers plain resolve requests on the event loop that read them.
///
/// Hummingbird converts each request to HTTPTypes and hands it to a Swift
/// concurrency task: the event loop reads it, a pool thread routes it, and the
/// event loop writes the answer. A resolve is a few microseconds of work (a small
/// JSON body in, a pre-encoded flow out), so those conversions and thread hops cost
/// more than the resolve itself. This handler sits in Hummingbird's HTTP/1.1
/// pipeline right after NIO's HTTP parser and answers
/// `POST /apps/{app}/placements/{key}/resolve` and `…/resolve-batch` itself,
/// through the same `ResolveServer.resolve` the router's routes call, so the two
/// paths cannot disagree. Everything else passes on to the router, and so does a
/// resolve:
///
/// - whose path is not in its plain form (`ResolveRoute(path:)`);
/// - that ends the connection (`Connection: close`, HTTP/1.0 without keep-alive);
/// - while faults that take time or break the connection are set (latency,
///   `close_connection`): the router's async path delivers those;
/// - while an earlier request on the connection is still with the router: HTTP/1.1
///   answers in order, so a later one must not overtake it.
final class ResolveFastPath: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// A request this handler answers, while its body arrives.
    private struct Pending {
        let route: ResolveRoute
        let authorization: String?
        let host: String?
        /// The path and the arrival time, for the request log (nil without one).
        let logged: (path: Substring, start: ContinuousClock.Instant)?
        let faults: Faults
        var body: ByteBuffer?
        /// Over the limit: the rest is read and dropped, and the answer is 413.
        var tooLarge = false

        /// Collects one more piece of the body, up to the server's limit.
        mutating func append(_ chunk: ByteBuffer) {
            guard !tooLarge else { return }
            if body == nil { body = chunk } else { body?.writeImmutableBuffer(chunk) }
            if (body?.readableBytes ?? 0) > ResolveServer.maxBodyBytes {
                tooLarge = true
                body = nil
            }
        }
    }

    private let server: ResolveServer
    private let log: RequestLogWriter?
    private var pending: Pending?
    /// Requests passed to the router whose response has not ended yet.
    private var forwardedInFlight = 0
    private var needsFlush = false
    /// Whether anything passed on to the router since the last read completed:
    /// when nothing did, the handlers after this one have nothing to complete.
    private var forwardedSinceReadComplete = false
    /// A read held back while the channel is not writable.
    private var readHeld = false

    init(server: ResolveServer, log: RequestLogWriter?) {
        self.server = server
        self.log = log
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if forwardedInFlight == 0, let answerable = answerable(head) {
                pending = answerable
                return
            }
            forwardedInFlight += 1
        case .body(let chunk) where pending != nil:
            pending?.append(chunk)
            return
        case .end where pending != nil:
            if let request = pending.take() { answer(request, context: context) }
            return
        case .body, .end:
            break
        }
        forwardedSinceReadComplete = true
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        if forwardedSinceReadComplete {
            forwardedSinceReadComplete = false
            context.fireChannelReadComplete()
        }
    }

    // Backpressure: answers written here bypass the async channel's own, so a client
    // that pipelines requests without reading the answers would otherwise make the
    // server buffer them without bound. While the socket cannot take more, read no more.

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            context.read()
        } else {
            readHeld = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, readHeld {
            readHeld = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Only the router's responses come through here; this handler writes its
        // own from its context, past itself.
        if case .end = unwrapOutboundIn(data), forwardedInFlight > 0 { forwardedInFlight -= 1 }
        context.write(data, promise: promise)
    }

    private func answerable(_ head: HTTPRequestHead) -> Pending? {
        guard head.method == .POST, head.isKeepAlive else { return nil }
        let uri = head.uri
        let path = uri.utf8.firstIndex(of: UInt8(ascii: "?")).map { uri[..<$0] } ?? uri[...]
        guard let route = ResolveRoute(path: path) else { return nil }
        let faults = server.currentFaults
        if faults.needsAsyncDelivery { return nil }
        return Pending(
            route: route, authorization: head.headers.first(name: "authorization"),
            host: head.headers.first(name: "host"), logged: log == nil ? nil : (path, .now), faults: faults)
    }

    private func answer(_ pending: Pending, context: ChannelHandlerContext) {
        let body = pending.tooLarge ? nil : pending.body ?? context.channel.allocator.buffer(capacity: 0)
        let reply = server.resolve(
            pending.route, authorization: pending.authorization, authority: pending.host, body: body,
            faults: pending.faults)
        var headers = HTTPHeaders()
        headers.reserveCapacity(4)
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(reply.body.readableBytes))
        headers.add(name: "Date", value: HTTPDate.now())
        if let after = reply.retryAfter { headers.add(name: "Retry-After", value: String(after)) }
        let head = HTTPResponseHead(
            version: .http1_1,  // as Hummingbird answers every request
            status: HTTPResponseStatus(statusCode: reply.status.code, reasonPhrase: reply.status.reasonPhrase),
            headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(reply.body))), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
        needsFlush = true
        if let log, let logged = pending.logged {
            log.log(method: "POST", path: logged.path, status: reply.status.code, since: logged.start)
        }
    }
}

/// Hummingbird's HTTP/1.1 child channel with `ResolveFastPath` placed between NIO's
/// HTTP parser and Hummingbird's conversion of requests to HTTPTypes.
struct ResolveHTTP1Channel: ServerChildChannel {
    let http1: HTTP1Channel
    let server: ResolveServer
    let log: RequestLogWriter?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let codec = try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)
            try pipeline.addHandler(ResolveFastPath(server: server, log: log), position: .before(codec))
            return value
        }
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}
