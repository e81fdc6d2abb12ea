import FuzzSupport

@testable import FlowPilotCore

// JSON parser: never crashes, and the canonical form of any accepted document
// parses back to the same value and is its own canonical form. The member list
// (what a resolve body is read with) accepts exactly the objects `parse` does,
// with the same members.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Fuzz.bytes(start, count)
    let parsed = try? JSONValue.parse(data)
    let members = try? data.withUnsafeBytes { try JSONValue.parseMembers(bytes: $0) }
    Fuzz.check(
        (members != nil) == (parsed?.objectValue != nil), "parseMembers and parse disagree on whether this is an object"
    )
    if let members, let object = parsed?.objectValue {
        Fuzz.check(members.count == object.count, "parseMembers lost or added a member")
        Fuzz.check(members.allSatisfy { object[$0.key] == $0.value }, "parseMembers changed a member")
    }
    guard let value = parsed else { return 0 }
    let canonical = CanonicalJSON.data(value)
    guard let again = try? JSONValue.parse(canonical) else {
        Fuzz.fail("canonical form does not parse: \(String(decoding: canonical, as: UTF8.self))")
    }
    Fuzz.check(again == value, "round trip changed the value: \(String(decoding: canonical, as: UTF8.self))")
    Fuzz.check(CanonicalJSON.data(again) == canonical, "canonical form is not stable")
    return 0
}
