import FlowPilotCore
import Foundation

/// One app as `fpctl serve` holds it: the validated bundle, its targeting rules,
/// and each flow pre-encoded as compact JSON.
struct ServedApp: Sendable {
    let bundle: LoadedBundle
    let rules: TargetingRules?
    /// placement key -> compact JSON of the flow as bundled.
    let flowJSON: [String: Data]

    init(bundle: LoadedBundle, rules: TargetingRules?) {
        self.bundle = bundle
        self.rules = rules
        flowJSON = bundle.flows.mapValues { CanonicalJSON.data($0.document.json) }
    }

    /// Loads a bundle source directory or `.fpbundle`, with `rules.json` in the
    /// source directory or `NAME.rules.json` beside `NAME.fpbundle`.
    static func load(_ path: String) throws -> ServedApp {
        let bundle = try LoadedBundle.open(path)
        var isDir: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDir)
        let rulesPath = isDir.boolValue
            ? URL(fileURLWithPath: path).appendingPathComponent("rules.json").path
            : URL(fileURLWithPath: path).deletingPathExtension().path + ".rules.json"
        guard FileManager.default.fileExists(atPath: rulesPath) else { return ServedApp(bundle: bundle, rules: nil) }
        let (rules, findings) = try TargetingRules.load(rulesPath, flows: Set(bundle.flows.keys))
        guard let rules else { throw FPError.invalid(findings) }
        return ServedApp(bundle: bundle, rules: rules)
    }

    /// The flow for this identity: nil for no flow; throws nothing, unknown
    /// placements are the caller's to report.
    func flowKey(for placement: String, userID: String, attributes: [String: JSONValue]) -> String? {
        guard let rules else { return placement }
        return rules.choose(placement: placement, userID: userID, attributes: attributes) ?? nil
    }

    /// The flow's JSON with every image and font URL pointing at this server's
    /// own `/media/…` and `/fonts/…` routes (content hash recomputed).
    func rewrittenFlowJSON(_ key: String, base: String) -> Data? {
        guard let flow = bundle.flows[key] else { return nil }
        let mediaPaths = bundle.media.mapValues(\.path)
        let fontPaths = bundle.fonts.mapValues(\.path)
        var json = Self.rewrite(flow.document.json) { url in mediaPaths[url].map { "\(base)/\($0)" } }
        if case .object(var doc) = json, case .array(let fonts)? = doc["fonts"] {
            doc["fonts"] = .array(fonts.map { font in
                guard case .object(var f) = font, let name = f["name"]?.stringValue, let path = fontPaths[name] else { return font }
                f["url"] = .string("\(base)/\(path)")
                return .object(f)
            })
            if doc["content_hash"] != nil {
                doc.removeValue(forKey: "content_hash")
                doc["content_hash"] = .string(FlowDocument.computeContentHash(.object(doc)))
            }
            json = .object(doc)
        }
        return CanonicalJSON.data(json)
    }

    /// Rewrites every component `src` the map knows, recursively.
    private static func rewrite(_ value: JSONValue, _ map: (String) -> String?) -> JSONValue {
        switch value {
        case .object(var members):
            if let src = members["src"]?.stringValue, let replaced = map(src) { members["src"] = .string(replaced) }
            for (k, v) in members where k != "src" && k != "fonts" { members[k] = rewrite(v, map) }
            return .object(members)
        case .array(let items):
            return .array(items.map { rewrite($0, map) })
        default:
            return value
        }
    }
}
