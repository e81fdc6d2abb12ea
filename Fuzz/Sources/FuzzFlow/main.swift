import Foundation
import FuzzSupport

@testable import FlowPilotCore

// The flow validator: never crashes; a flow it accepts is accepted again, with
// the same content hash, after a round trip through its canonical form.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFlow(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let (doc, findings) = FlowDocument.validate(data: Fuzz.bytes(start, count), location: "fuzz.json")
    guard doc != nil, let json = try? JSONValue.parse(Fuzz.bytes(start, count)) else {
        Fuzz.check(doc != nil || findings.hasErrors, "a flow rejected without an error finding")
        return 0
    }
    let canonical = CanonicalJSON.data(json)
    guard let again = try? JSONValue.parse(canonical) else { Fuzz.fail("canonical form does not parse") }
    let (doc2, _) = FlowDocument.validate(again, location: "fuzz.json")
    Fuzz.check(doc2 != nil, "a valid flow fails after a canonical round trip")
    Fuzz.check(
        FlowDocument.computeContentHash(json) == FlowDocument.computeContentHash(again),
        "content hash changed in a canonical round trip")
    return 0
}
