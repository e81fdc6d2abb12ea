import FuzzSupport

@testable import FlowPilotCore

// JSON parser: never crashes, and the canonical form of any accepted document
// parses back to the same value and is its own canonical form.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Fuzz.bytes(start, count)
    guard let value = try? JSONValue.parse(data) else { return 0 }
    let canonical = CanonicalJSON.data(value)
    guard let again = try? JSONValue.parse(canonical) else {
        Fuzz.fail("canonical form does not parse: \(String(decoding: canonical, as: UTF8.self))")
    }
    Fuzz.check(again == value, "round trip changed the value: \(String(decoding: canonical, as: UTF8.self))")
    Fuzz.check(CanonicalJSON.data(again) == canonical, "canonical form is not stable")
    return 0
}
