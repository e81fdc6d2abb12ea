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
        let audience: [ExactName: Condition]
        let outcome: Outcome
    }

    let placements: [String: [Candidate]]

    /// The placement key whose flow answers this identity, or nil for no flow
    /// (an explicit null, or no candidate matching). Placements without rules
    /// answer their own flow.
    func choose(placement: String, userID: String, attributes: [ExactName: JSONValue]) -> String? {
        guard let candidates = placements[placement] else { return placement }
        for candidate in candidates where candidate.audience.allSatisfy({ $0.value.matches(attributes[$0.key]) }) {
            switch candidate.outcome {
            case .flow(let key): return key
            case .experiment(let id, let variants):
                // Loading guarantees a positive total weight.
                let total = variants.reduce(0) { $0 + $1.weight }
                guard total > 0 else { return nil }
                var point = Self.bucket(userID: userID, experiment: id) % total
                for variant in variants {
                    if point < variant.weight { return variant.flow }
                    point -= variant.weight
                }
            }
        }
        return nil
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
        return parse(data, path: path, flows: flows)
    }

    /// A rules document's bytes; `path` names it in findings.
    static func parse(_ data: Data, path: String, flows: Set<String>) -> (TargetingRules?, [Finding]) {
        let json: JSONValue
        do { json = try JSONValue.parse(data) } catch { return (nil, [.error("rules-json", path, "\(error)")]) }
        guard let map = json["placements"]?.objectValue else {
            return (nil, [.error("rules-invalid", "\(path)#/placements", "placements must be an object")])
        }
        var parser = RulesParser(path: path, flows: flows)
        var placements: [String: [Candidate]] = [:]
        for (name, list) in map.sorted(by: { $0.key < $1.key }) {
            let placement = name.string
            // Placements are looked up by `String`: two keys of one text in other bytes would be merged.
            guard placements[placement] == nil else {
                parser.fail("/placements/\(placement)", "another placement key is the same text in other bytes")
                continue
            }
            guard let items = list.arrayValue else {
                parser.fail("/placements/\(placement)", "must be an array of candidates")
                continue
            }
            placements[placement] = items.enumerated().compactMap { i, item in
                parser.candidate(item, at: "/placements/\(placement)/\(i)")
            }
        }
        let findings = parser.findings
        return (findings.hasErrors ? nil : TargetingRules(placements: placements), findings)
    }
}

/// One rules file's candidates, each mistake a finding (rule `rules-invalid`)
/// at its JSON path, so `serve` refuses to start rather than fail on a request.
private struct RulesParser {
    let path: String
    let flows: Set<String>
    var findings: [Finding] = []

    mutating func fail(_ pointer: String, _ message: String) {
        findings.append(.error("rules-invalid", "\(path)#\(pointer)", message))
    }

    mutating func candidate(_ item: JSONValue, at pointer: String) -> TargetingRules.Candidate? {
        let audience = audience(item["audience"], at: pointer + "/audience")
        if let experiment = item["experiment"] {
            return self.experiment(experiment, at: pointer + "/experiment").map {
                TargetingRules.Candidate(audience: audience, outcome: $0)
            }
        }
        guard let flow = flowRef(item["flow"], at: pointer + "/flow") else { return nil }
        return TargetingRules.Candidate(audience: audience, outcome: .flow(flow))
    }

    /// Attribute name (its bytes, as an identity's attributes are keyed) -> condition.
    private mutating func audience(_ value: JSONValue?, at pointer: String) -> [ExactName: TargetingRules.Condition] {
        var audience: [ExactName: TargetingRules.Condition] = [:]
        // No audience matches everyone; one that is not an object must not quietly do the same.
        if let value, value.objectValue == nil {
            fail(pointer, "audience must be an object of attribute conditions")
        }
        for (attribute, condition) in value?.objectValue ?? [:] {
            if let v = condition["equals"] {
                audience[attribute] = .equals(v)
            } else if let list = condition["in"]?.arrayValue {
                audience[attribute] = .oneOf(list)
            } else if case .bool(let b)? = condition["exists"] {
                audience[attribute] = .exists(b)
            } else {
                fail(
                    "\(pointer)/\(attribute)", "a condition is {\"equals\": v}, {\"in\": [...]} or {\"exists\": bool}")
            }
        }
        return audience
    }

    /// An id and variants with positive whole weights; nil (with findings) otherwise.
    private mutating func experiment(_ value: JSONValue, at pointer: String) -> TargetingRules.Outcome? {
        guard let id = value["id"]?.stringValue, !id.isEmpty, let list = value["variants"]?.arrayValue,
            !list.isEmpty
        else {
            fail(pointer, "an experiment needs an id and a non-empty variants array")
            return nil
        }
        var variants: [TargetingRules.Variant] = []
        var valid = true
        for (j, variant) in list.enumerated() {
            if let parsed = self.variant(variant, at: "\(pointer)/variants/\(j)") {
                variants.append(parsed)
            } else {
                valid = false
            }
        }
        return valid ? .experiment(id: id, variants: variants) : nil
    }

    private mutating func variant(_ value: JSONValue, at pointer: String) -> TargetingRules.Variant? {
        guard let name = value["name"]?.stringValue, !name.isEmpty else {
            fail(pointer + "/name", "a variant needs a name")
            return nil
        }
        // Whole numbers keep the split exact; the cap keeps any sum of them far from overflowing.
        guard let weight = value["weight"]?.numberValue, weight >= 1, weight.rounded() == weight, weight <= 1e9
        else {
            fail(pointer + "/weight", "weight must be a whole number from 1 to 1000000000")
            return nil
        }
        guard let flow = flowRef(value["flow"], at: pointer + "/flow") else { return nil }
        return TargetingRules.Variant(name: name, weight: UInt64(weight), flow: flow)
    }

    /// A placement key of the bundle (`.some(key)`), or null (`.some(nil)`); nil after a finding.
    private mutating func flowRef(_ value: JSONValue?, at pointer: String) -> String?? {
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
}
