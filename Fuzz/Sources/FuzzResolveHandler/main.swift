import FuzzSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1

@testable import FlowPilotServer

// The server's resolve handler, fed raw bytes through NIO's HTTP/1 server pipeline
// in an EmbeddedChannel, right after the HTTP parser as `fpctl serve` places it (no
// router behind it here: the other requests are passed on and left unanswered,
// holding what follows, as they would be held until the router answers): never a
// crash or a trap, and whatever it writes is HTTP/1.1 responses.
let server: ResolveServer = {
    var options = ResolveServer.Options()
    options.quiet = true
    options.apiKey = "fuzz-key"
    do {
        return try ResolveServer(sources: [Fuzz.bundlesDirectory + "/demo"], options: options)
    } catch {
        Fuzz.fail("cannot load the demo bundle from \(Fuzz.bundlesDirectory): \(error)")
    }
}()

/// Loads the server before the first input, so its one-time allocations are not
/// counted against an input by the leak check.
@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutableRawPointer, _ argv: UnsafeMutableRawPointer) -> CInt {
    _ = server
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResolveHandler(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let channel = EmbeddedChannel()
    do {
        let pipeline = channel.pipeline.syncOperations
        try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
        try ResolveHandler.install(in: pipeline, at: .last, server: server, log: nil)
    } catch {
        Fuzz.fail("pipeline setup: \(error)")
    }
    var input = channel.allocator.buffer(capacity: count)
    input.writeBytes(UnsafeRawBufferPointer(start: start, count: count))
    // Half the inputs arrive in two reads, so a request split mid-head or
    // mid-body is exercised too.
    let cut = count > 1 ? Int(start.load(as: UInt8.self)) % count : count
    for piece in [input.getSlice(at: 0, length: cut), input.getSlice(at: cut, length: count - cut)] {
        guard let piece, piece.readableBytes > 0 else { continue }
        do { try channel.writeInbound(piece) } catch { break }
    }
    var output = channel.allocator.buffer(capacity: 0)
    while let part = try? channel.readOutbound(as: IOData.self) {
        if case .byteBuffer(var buffer) = part { output.writeBuffer(&buffer) }
    }
    if output.readableBytes > 0 {
        let head = output.getString(at: 0, length: min(9, output.readableBytes)) ?? ""
        Fuzz.check(head == "HTTP/1.1 ", "output does not start an HTTP/1.1 response: \(head.debugDescription)")
    }
    // The handler closes the channel itself after an answer that ends the
    // connection; finish must still run the loop that takes the pipeline apart.
    _ = try? channel.finish(acceptAlreadyClosed: true)
    return 0
}
