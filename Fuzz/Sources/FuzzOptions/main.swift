import Foundation
import FuzzSupport

@testable import FlowPilotCore
@testable import FlowPilotOutput

// Option values as the commands parse them (--timeout, --grace, --max-age,
// --max-size, --shard, --rate, --latency, --format, a TTL): never a crash on
// any text, and a value that parses is one the callers can use without a trap
// (a Duration, a positive rate, a shard inside its count).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOptions(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: Fuzz.bytes(start, count), as: UTF8.self)
    if let seconds = Units.parseSignedDuration(text) {
        Fuzz.check(!seconds.isNaN, "duration \(text.debugDescription) is NaN")
        let duration = Units.duration(seconds: seconds, limit: 36500 * 86400)
        Fuzz.check(duration >= .zero, "duration \(text.debugDescription) gave \(duration)")
    }
    if let bytes = Units.parseSize(text) {
        Fuzz.check(bytes >= 0, "size \(text.debugDescription) gave \(bytes)")
    }
    if let shard = Shard(text) {
        Fuzz.check((1...shard.count).contains(shard.index), "shard \(text.debugDescription) gave \(shard)")
        _ = Shard.index(of: text, among: shard.count)
    }
    if let rate = RequestPacer.Rate(text) {
        Fuzz.check(rate.perSecond > 0 && rate.perSecond.isFinite, "rate \(text.debugDescription) gave \(rate)")
    }
    if let latency = Units.parseLatency(text) {
        Fuzz.check(
            (1...2).contains(latency.count) && latency.allSatisfy { $0 >= 0 }, "latency \(text.debugDescription)")
    }
    _ = OutputFormat(name: text)
    if let number = Double(text), let ttl = TTL.seconds(number) {
        Fuzz.check(TTL.range.contains(ttl), "ttl \(text.debugDescription) gave \(ttl)")
    }
    return 0
}
