import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Answers every resolve request, `POST /apps/{app}/placements/{key}/resolve` and
/// `…/resolve-batch`, on the event loop that read it (docs/serve.md, "Performance:
/// one path per route"). Hummingbird's router answers the rest: admin, media and fonts.
///
/// It sits in Hummingbird's HTTP/1.1 pipeline right after NIO's HTTP parser, before
/// Hummingbird converts requests to HTTPTypes and hands them to a Swift concurrency
/// task: a resolve is a few microseconds of work (a small JSON body in, a
/// pre-encoded flow out), less than those conversions and thread hops cost.
///
/// One connection answers in request order (HTTP/1.1). While an answer is owed, by
/// the router or by a resolve held back by a latency fault, the requests that follow
/// are held, unread, and taken up in order when it is written.
final class ResolveHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// A resolve request, while its body arrives.
    private struct Pending {
        let route: ResolveRoute
        let authorization: String?
        let host: String?
        /// False for `Connection: close` and HTTP/1.0 without keep-alive: the
        /// connection closes after the answer.
        let keepAlive: Bool
        /// The path and the arrival time, for the request log (nil without one).
        let logged: (path: Substring, start: ContinuousClock.Instant)?
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
    /// The resolve request being read, if the current request is one.
    private var pending: Pending?
    /// Requests passed on to the router whose response has not ended yet.
    private var routerOwes = 0
    /// A resolve answer waiting out a latency fault.
    private var delayed: Scheduled<Void>?
    /// Which hold `delayed` is, when a `hold` fault holds it (counted per connection).
    private var holdNumber = 0
    /// Request parts that came while an answer was owed, taken up in order after it.
    private var held = CircularBuffer<HTTPServerRequestPart>()
    /// The connection closes after an answer: nothing more is read or answered.
    private var closing = false
    /// The server is shutting down: the owed answer is this connection's last.
    private var quiescing = false
    private var needsFlush = false
    /// Whether anything passed on to the router since the last read completed:
    /// when nothing did, the handlers after this one have nothing to complete.
    private var forwardedSinceReadComplete = false
    /// A read held back: the channel is not writable, or requests are held.
    private var readHeld = false

    /// `EncodedAnswers`' context, where answers are written past the response
    /// encoder; let go when this handler leaves the pipeline.
    private var socketSide: ChannelHandlerContext?

    init(server: ResolveServer, log: RequestLogWriter?, socketSide: ChannelHandlerContext) {
        self.server = server
        self.log = log
        self.socketSide = socketSide
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        socketSide = nil
    }

    private var owesAnswer: Bool { routerOwes > 0 || delayed != nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let part = unwrapInboundIn(data)
        if !held.isEmpty {
            held.append(part)
        } else if case .head = part, owesAnswer {
            held.append(part)
        } else {
            take(part, context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        completeRead(context: context)
    }

    /// One part of a request that may be taken up now.
    private func take(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            if let resolve = pending(head) {
                pending = resolve
                return
            }
            routerOwes += 1
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
        context.fireChannelRead(wrapInboundOut(part))
    }

    /// Flushes what was answered and completes the read for the router.
    private func completeRead(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        if forwardedSinceReadComplete {
            forwardedSinceReadComplete = false
            context.fireChannelReadComplete()
        }
    }

    /// Takes up held requests once no answer is owed, then reads on.
    private func takeUpHeld(context: ChannelHandlerContext) {
        while !closing, let part = held.first {
            if case .head = part, owesAnswer { break }
            take(held.removeFirst(), context: context)
        }
        completeRead(context: context)
        if held.isEmpty, readHeld, context.channel.isWritable {
            readHeld = false
            context.read()
        }
    }

    // Backpressure: answers written here bypass the async channel's own, so a client
    // that pipelines requests without reading the answers would otherwise make the
    // server buffer them without bound. While the socket cannot take more, or
    // requests wait their turn, read no more.

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable, held.isEmpty {
            context.read()
        } else {
            readHeld = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, readHeld, held.isEmpty {
            readHeld = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Only the router's responses come through here; this handler writes its
        // own from its context, past itself.
        if case .end = unwrapOutboundIn(data), routerOwes > 0 {
            routerOwes -= 1
            if routerOwes == 0, !held.isEmpty {
                // After this write, not inside it.
                context.eventLoop.assumeIsolated().execute { self.takeUpHeld(context: context) }
            }
        }
        context.write(data, promise: promise)
    }

    /// serve's graceful shutdown (SIGTERM, SIGINT) asks every connection to
    /// quiesce. Hummingbird's connection handler, past the codec, never sees
    /// the resolves answered here, so it would close a connection whose
    /// resolve is still owed (a client saw an empty reply). While one is owed,
    /// the event stops here: the answer is written with `Connection: close`,
    /// and the connection closes after it.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, pending != nil || delayed != nil {
            quiescing = true
            // A stop waits for owed answers: those a `hold` fault holds are let go, not waited a day for.
            server.releaseHolds()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let delayed = delayed.take() {
            delayed.cancel()
            server.stats.ended()
        }
        held.removeAll()
        context.fireChannelInactive()
    }

    // MARK: Answering

    /// The request as a resolve to answer here, or nil for the router.
    private func pending(_ head: HTTPRequestHead) -> Pending? {
        guard head.method == .POST else { return nil }
        let path = ResolveRoute.path(ofTarget: head.uri)
        guard let route = ResolveRoute(path: path) else { return nil }
        return Pending(
            route: route, authorization: head.headers.first(name: "authorization"),
            host: head.headers.first(name: "host"), keepAlive: head.isKeepAlive,
            logged: log == nil ? nil : (path, .now))
    }

    private func answer(_ request: Pending, context: ChannelHandlerContext) {
        server.stats.began()
        let body = request.tooLarge ? nil : request.body ?? context.channel.allocator.buffer(capacity: 0)
        // Read before the faults, so a hold drawn from a set replaced meanwhile is let go at once.
        let generation = server.holdGeneration
        let reply = server.resolve(
            request.route, authorization: request.authorization, authority: request.host, body: body,
            faults: server.currentFaults)
        guard reply.delayMilliseconds > 0 || reply.held else {
            deliver(reply, to: request, context: context)
            return
        }
        // A held answer waits for the fault set to be replaced; a day bounds it as a latency would.
        answer(reply, to: request, after: reply.held ? 86_400_000 : reply.delayMilliseconds, context: context)
        guard reply.held else { return }
        // Let go early, on this connection's loop, when the faults change: answered as the timer would
        // (after the latency the request drew, if any), unless the connection went first.
        holdNumber += 1
        let bound = NIOLoopBound((self, context, holdNumber, request), eventLoop: context.eventLoop)
        let delay = reply.delayMilliseconds
        server.hold(since: generation) {
            bound.eventLoop.execute {
                let (handler, context, number, request) = bound.value
                guard let current = handler.delayed, handler.holdNumber == number else { return }
                current.cancel()
                handler.delayed = nil
                handler.answer(reply, to: request, after: delay, context: context)
            }
        }
    }

    /// `reply` written after `milliseconds` (at once for none), then what was held behind it taken up.
    private func answer(
        _ reply: ResolveReply, to request: Pending, after milliseconds: Int, context: ChannelHandlerContext
    ) {
        guard milliseconds > 0 else {
            deliver(reply, to: request, context: context)
            takeUpHeld(context: context)
            return
        }
        delayed = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(milliseconds))) {
            self.delayed = nil
            self.deliver(reply, to: request, context: context)
            self.takeUpHeld(context: context)
        }
    }

    /// Writes the answer, encoded here as NIO's response encoder would (status line;
    /// `Content-Type`, `Content-Length`, `Date`, `Retry-After` when set, and
    /// `Connection: close` when the connection ends), head and body in one buffer,
    /// straight to the socket side of the encoder (`EncodedAnswers`).
    private func deliver(_ reply: ResolveReply, to request: Pending, context: ChannelHandlerContext) {
        defer { server.stats.ended() }
        guard let socket = socketSide else { return }  // the connection is being torn down
        // Half the body, then the connection ends: what a dropped connection looks like.
        let body =
            reply.closeMidBody
            ? reply.body.getSlice(at: reply.body.readerIndex, length: reply.body.readableBytes / 2) ?? ByteBuffer()
            : reply.body
        var out = context.channel.allocator.buffer(capacity: 192 + body.readableBytes)
        out.writeStaticString("HTTP/1.1 ")  // as Hummingbird answers every request
        out.writeString(String(reply.status.code))
        out.writeStaticString(" ")
        // NIO's phrase for a code it knows (413 is "Payload Too Large"), as its encoder wrote.
        let status = HTTPResponseStatus(statusCode: reply.status.code, reasonPhrase: reply.status.reasonPhrase)
        out.writeString(status.reasonPhrase)
        out.writeStaticString("\r\nContent-Type: application/json\r\nContent-Length: ")
        out.writeString(String(reply.body.readableBytes))
        out.writeStaticString("\r\nDate: ")
        out.writeString(HTTPDate.now())
        if let after = reply.retryAfter {
            out.writeStaticString("\r\nRetry-After: ")
            out.writeString(String(after))
        }
        let keepAlive = request.keepAlive && !quiescing
        if !keepAlive { out.writeStaticString("\r\nConnection: close") }
        out.writeStaticString("\r\n\r\n")
        out.writeImmutableBuffer(body)
        if let logged = request.logged {
            log?.log(method: "POST", path: logged.path, status: reply.status.code, since: logged.start)
        }
        guard keepAlive, !reply.closeMidBody else {
            // The last bytes on this connection: flush, and close once they are sent.
            closing = true
            held.removeAll()
            socket.writeAndFlush(NIOAny(IOData.byteBuffer(out))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
            return
        }
        socket.write(NIOAny(IOData.byteBuffer(out)), promise: nil)
        needsFlush = true
    }
}

extension ResolveHandler {
    /// Adds a resolve handler at `position`, which must be after NIO's HTTP/1.1
    /// request decoder, and `EncodedAnswers` just past the response encoder.
    static func install(
        in pipeline: ChannelPipeline.SynchronousOperations, at position: ChannelPipeline.SynchronousOperations.Position,
        server: ResolveServer, log: RequestLogWriter?
    ) throws {
        let encoder = try pipeline.handler(type: HTTPResponseEncoder.self)
        let answers = EncodedAnswers()
        try pipeline.addHandler(answers, position: .before(encoder))
        let socketSide = try pipeline.context(handler: answers)
        try pipeline.addHandler(ResolveHandler(server: server, log: log, socketSide: socketSide), position: position)
    }
}

/// Where `ResolveHandler` writes its answers, already encoded: just past
/// Hummingbird's HTTP/1.1 response encoder, on the socket's side. It passes on
/// everything, the encoder's output included, as it is.
final class EncodedAnswers: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData
}

/// Hummingbird's HTTP/1.1 child channel with `ResolveHandler` placed between NIO's
/// HTTP parser and Hummingbird's conversion of requests to HTTPTypes.
struct ResolveHTTP1Channel: ServerChildChannel {
    let http1: HTTP1Channel
    let server: ResolveServer
    let log: RequestLogWriter?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let codec = try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)
            try ResolveHandler.install(in: pipeline, at: .before(codec), server: server, log: log)
            return value
        }
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}
