import FlowPilotCore
import Foundation
import NIOCore
import Synchronization

/// One app as `fpctl serve` holds it: the validated bundle, its targeting rules,
/// and each flow pre-encoded as compact JSON. A class: every resolve looks its app
/// up, and a reference is one retain where this struct's copy was six.
final class ServedApp: Sendable {
    let bundle: LoadedBundle
    let rules: TargetingRules?
    /// placement key -> compact JSON of the flow as bundled.
    let flowJSON: [String: Data]
    /// Whole response bodies, pre-encoded: [placement][flow key, "" for null].
    private let responses: [String: [String: ByteBuffer]]
    private let ttl: Int?
    /// The same, with asset URLs rewritten, per base URL (`--rewrite-asset-urls`).
    private let rewritten = RewrittenAnswers()

    init(bundle: LoadedBundle, rules: TargetingRules?, ttl: Int?) {
        self.bundle = bundle
        self.rules = rules
        self.ttl = ttl
        let flowJSON = bundle.flows.mapValues { CanonicalJSON.data($0.document.json) }
        self.flowJSON = flowJSON
        responses = Self.encodeResponses(
            placements: Set(bundle.flows.keys).union(rules?.placements.keys ?? [:].keys), flowJSON: flowJSON, ttl: ttl)
    }

    /// Every answer a single resolve can give, as whole bodies.
    private static func encodeResponses(placements: Set<String>, flowJSON: [String: Data], ttl: Int?)
        -> [String: [String: ByteBuffer]]
    {
        var responses: [String: [String: ByteBuffer]] = [:]
        for placement in placements {
            var byFlow: [String: ByteBuffer] = [
                "": ByteBuffer(bytes: Self.resultJSON(placement: placement, flow: nil, ttl: ttl))
            ]
            for (key, json) in flowJSON {
                byFlow[key] = ByteBuffer(bytes: Self.resultJSON(placement: placement, flow: json, ttl: ttl))
            }
            responses[placement] = byFlow
        }
        return responses
    }

    func cachedResponse(placement: String, flow: String?) -> ByteBuffer? {
        responses[placement]?[flow ?? ""]
    }

    /// As `cachedResponse`, with asset URLs pointing at `base`.
    func cachedResponse(placement: String, flow: String?, base: String) -> ByteBuffer? {
        answers(base: base).responses[placement]?[flow ?? ""]
    }

    /// The flow's JSON with asset URLs pointing at `base`, encoded once per base.
    func rewrittenFlowJSON(_ key: String, base: String) -> Data? {
        answers(base: base).flows[key]
    }

    private func answers(base: String) -> RewrittenAnswers.Table {
        rewritten.table(base: base) {
            let flows = Dictionary(
                uniqueKeysWithValues: bundle.flows.keys.compactMap { key in
                    rewriteFlowJSON(key, base: base).map { (key, $0) }
                })
            let placements = Set(bundle.flows.keys).union(rules?.placements.keys ?? [:].keys)
            return RewrittenAnswers.Table(
                flows: flows, responses: Self.encodeResponses(placements: placements, flowJSON: flows, ttl: ttl))
        }
    }

    /// `{"cache_ttl_seconds"?, "flow", "placement_key"}` with the flow's JSON spliced in.
    static func resultJSON(placement: String, flow: Data?, ttl: Int?) -> Data {
        var out = Data("{".utf8)
        if let ttl { out.append(contentsOf: Array("\"cache_ttl_seconds\":\(ttl),".utf8)) }
        out.append(contentsOf: Array("\"flow\":".utf8))
        out.append(flow ?? Data("null".utf8))
        out.append(contentsOf: Array(",\"placement_key\":".utf8))
        out.append(CanonicalJSON.data(.string(placement)))
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Loads a bundle source directory or `.fpbundle`, with `rules.json` in the
    /// source directory or `NAME.rules.json` beside `NAME.fpbundle`.
    static func load(_ path: String, ttl: Int?) throws -> ServedApp {
        let bundle = try LoadedBundle.open(path)
        var isDir: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDir)
        let rulesPath =
            isDir.boolValue
            ? URL(fileURLWithPath: path).appendingPathComponent("rules.json").path
            : URL(fileURLWithPath: path).deletingPathExtension().path + ".rules.json"
        guard FileManager.default.fileExists(atPath: rulesPath) else {
            return ServedApp(bundle: bundle, rules: nil, ttl: ttl)
        }
        let (rules, findings) = try TargetingRules.load(rulesPath, flows: Set(bundle.flows.keys))
        guard let rules else { throw FPError.invalid(findings) }
        return ServedApp(bundle: bundle, rules: rules, ttl: ttl)
    }

    /// The flow for this identity: nil for no flow; throws nothing, unknown
    /// placements are the caller's to report.
    func flowKey(for placement: String, userID: String, attributes: [ExactName: JSONValue]) -> String? {
        guard let rules else { return placement }
        return rules.choose(placement: placement, userID: userID, attributes: attributes)
    }

    /// The flow's JSON with every image and font URL pointing at this server's
    /// own `/media/…` and `/fonts/…` routes (content hash recomputed).
    private func rewriteFlowJSON(_ key: String, base: String) -> Data? {
        guard let flow = bundle.flows[key] else { return nil }
        let mediaPaths = bundle.media.mapValues(\.path)
        let fontPaths = bundle.fonts.mapValues(\.path)
        var json = Self.rewrite(flow.document.json) { url in mediaPaths[ExactName(url)].map { "\(base)/\($0)" } }
        if case .object(var doc) = json, case .array(let fonts)? = doc["fonts"] {
            doc["fonts"] = .array(
                fonts.map { font in
                    guard case .object(var f) = font, let name = f["name"]?.stringValue,
                        let path = fontPaths[ExactName(name)]
                    else { return font }
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

/// Answers with rewritten asset URLs, encoded on the first request for a base URL
/// and then served like the plain pre-encoded ones. The base comes from the
/// client's Host header, so at most `maxBases` are kept; others are encoded per
/// request.
final class RewrittenAnswers: Sendable {
    struct Table: Sendable {
        /// placement key -> rewritten flow JSON.
        let flows: [String: Data]
        /// [placement][flow key, "" for null] -> whole body.
        let responses: [String: [String: ByteBuffer]]
    }

    static let maxBases = 16
    private let tables = Mutex<[String: Table]>([:])

    func table(base: String, encode: () -> Table) -> Table {
        if let table = tables.withLock({ $0[base] }) { return table }
        let table = encode()
        tables.withLock { tables in
            if tables[base] == nil, tables.count < Self.maxBases { tables[base] = table }
        }
        return table
    }
}
