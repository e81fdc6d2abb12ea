import Crypto
import FlowPilotCore
import Foundation

/// Optional targeting for `fpctl serve` (docs/serve.md): per placement, an ordered
/// list of candidates; the first whose audience matches the identity answers.
/// A candidate names a flow by the placement key it is bundled under (or null for
/// no flow), or runs an experiment whose variant is picked deterministically from
/// SHA-256(user_id + ":" + experiment id), so one identity always sees one variant.
struct TargetingRules: Sendable {
    enum Condition: Sendable {
        case equals(JSONValue)
        case oneOf([JSONValue])
        case exists(Bool)

        func matches(_ value: JSONValue?) -> Bool {
            switch self {
            case .equals(let v): value == v
            case .oneOf(let list): value.map(list.contains) ?? false
            case .exists(let wanted): (value != nil) == wanted
            }
        }
    }

    struct Variant: Sendable {
        let name: String
        let weight: UInt64
        let flow: String?
    }

    enum Outcome: Sendable {
        case flow(String?)
        case experiment(id: String, variants: [Variant])
    }

    struct Candidate: Sendable {
        let audience: [String: Condition]
        let outcome: Outcome
    }

    let placements: [String: [Candidate]]

    /// The placement key whose flow answers, or nil for `flow: null`.
    /// Returns `.some(nil)` for an explicit null, `nil` when no candidate matches.
    func choose(placement: String, userID: String, attributes: [String: JSONValue]) -> String?? {
        guard let candidates = placements[placement] else { return .some(placement) }
        for candidate in candidates where candidate.audience.allSatisfy({ $0.value.matches(attributes[$0.key]) }) {
            switch candidate.outcome {
            case .flow(let key): return .some(key)
            case .experiment(let id, let variants):
                let total = variants.reduce(0) { $0 + $1.weight }
                var point = Self.bucket(userID: userID, experiment: id) % total
                for v in variants {
                    if point < v.weight { return .some(v.flow) }
                    point -= v.weight
                }
            }
        }
        return .some(nil)
    }

    static func bucket(userID: String, experiment: String) -> UInt64 {
        let digest = Array(SHA256.hash(data: Data("\(userID):\(experiment)".utf8)))
        return digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}

extension TargetingRules {
    /// Parses a rules file; every problem is a finding naming its JSON path.
    static func load(_ path: String, flows: Set<String>) throws -> (TargetingRules?, [Finding]) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FPError.inputMissing("\(path): cannot read rules file")
        }
        let json: JSONValue
        do { json = try JSONValue.parse(data) } catch { return (nil, [.error("rules-json", path, "\(error)")]) }
        var findings: [Finding] = []
        func fail(_ pointer: String, _ message: String) {
            findings.append(.error("rules-invalid", "\(path)#\(pointer)", message))
        }
        func flowRef(_ value: JSONValue?, _ pointer: String) -> String?? {
            switch value {
            case .null?: return .some(nil)
            case .string(let key)? where flows.contains(key): return .some(key)
            case .string(let key)?:
                fail(pointer, "no placement '\(key)' in the bundle to take the flow from")
                return nil
            default:
                fail(pointer, "flow must be a placement key or null")
                return nil
            }
        }
        var placements: [String: [Candidate]] = [:]
        guard let map = json["placements"]?.objectValue else {
            return (nil, [.error("rules-invalid", "\(path)#/placements", "placements must be an object")])
        }
        for (placement, list) in map {
            guard let items = list.arrayValue else {
                fail("/placements/\(placement)", "must be an array of candidates")
                continue
            }
            var candidates: [Candidate] = []
            for (i, item) in items.enumerated() {
                let at = "/placements/\(placement)/\(i)"
                var audience: [String: Condition] = [:]
                for (attribute, cond) in item["audience"]?.objectValue ?? [:] {
                    if let v = cond["equals"] {
                        audience[attribute] = .equals(v)
                    } else if let list = cond["in"]?.arrayValue {
                        audience[attribute] = .oneOf(list)
                    } else if case .bool(let b)? = cond["exists"] {
                        audience[attribute] = .exists(b)
                    } else {
                        fail(
                            "\(at)/audience/\(attribute)",
                            "a condition is {\"equals\": v}, {\"in\": [...]} or {\"exists\": bool}")
                    }
                }
                if let experiment = item["experiment"] {
                    guard let id = experiment["id"]?.stringValue, !id.isEmpty,
                        let list = experiment["variants"]?.arrayValue, !list.isEmpty
                    else {
                        fail("\(at)/experiment", "an experiment needs an id and a non-empty variants array")
                        continue
                    }
                    var variants: [Variant] = []
                    for (j, v) in list.enumerated() {
                        guard let name = v["name"]?.stringValue, let w = v["weight"]?.numberValue, w > 0,
                            w.rounded() == w,
                            let flow = flowRef(v["flow"], "\(at)/experiment/variants/\(j)/flow")
                        else {
                            if v["name"]?.stringValue == nil || (v["weight"]?.numberValue ?? 0) <= 0 {
                                fail(
                                    "\(at)/experiment/variants/\(j)",
                                    "a variant needs a name and a positive whole weight")
                            }
                            continue
                        }
                        variants.append(Variant(name: name, weight: UInt64(w), flow: flow))
                    }
                    candidates.append(Candidate(audience: audience, outcome: .experiment(id: id, variants: variants)))
                } else if let flow = flowRef(item["flow"], "\(at)/flow") {
                    candidates.append(Candidate(audience: audience, outcome: .flow(flow)))
                }
            }
            placements[placement] = candidates
        }
        return (findings.hasErrors ? nil : TargetingRules(placements: placements), findings)
    }
}
