import Foundation
import FuzzSupport

@testable import FlowPilotCore

// Durations, sizes and RFC 3339 times as the commands take them: never a crash,
// and a value that parses is one the callers can use (finite, not negative).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUnits(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: Fuzz.bytes(start, count), as: UTF8.self)
    if let seconds = Units.parseDuration(text) {
        Fuzz.check(seconds.isFinite && seconds >= 0, "duration \(text.debugDescription) gave \(seconds)")
    }
    if let bytes = Units.parseSize(text) {
        Fuzz.check(bytes >= 0, "size \(text.debugDescription) gave \(bytes)")
    }
    if let date = RFC3339.parse(text) {
        Fuzz.check(date.timeIntervalSince1970.isFinite, "time \(text.debugDescription) is not finite")
    }
    return 0
}
