import Foundation
import FuzzSupport

@testable import FlowPilotCore
@testable import FlowPilotServer

// rules.json loading, then `choose` for identities made from the input: loading
// never crashes, and a loaded file only ever answers a flow it names (or none),
// the same one each time for the same identity.
let flows: Set<String> = ["home", "onboarding", "paywall", "upsell"]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRules(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Fuzz.bytes(start, count)
    let (rules, findings) = TargetingRules.parse(data, path: "rules.json", flows: flows)
    Fuzz.check((rules == nil) == findings.hasErrors, "rules refused without an error, or loaded with one")
    guard let rules else { return 0 }
    let attributeSets: [[ExactName: JSONValue]] = [
        [:], ["country": .string("DE")], ["plan": .string("pro"), "beta": .bool(true)], ["age": .number(42)],
    ]
    for placement in rules.placements.keys.sorted() + ["home", "unknown"] {
        for (i, attributes) in attributeSets.enumerated() {
            let user = "user-\(count)-\(i)"
            let chosen = rules.choose(placement: placement, userID: user, attributes: attributes)
            if let chosen {
                Fuzz.check(flows.contains(chosen) || chosen.sameBytes(as: placement), "chose unknown flow \(chosen)")
            }
            Fuzz.check(
                rules.choose(placement: placement, userID: user, attributes: attributes).sameBytes(as: chosen),
                "choice is not deterministic")
        }
    }
    return 0
}
