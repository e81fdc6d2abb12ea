import Foundation
import Synchronization

/// A validated flow document (schema v1; FlowValidator below holds the rules) and the references that
/// bundling and media warming need.
public struct FlowDocument: Sendable {
    public static let supportedSchemaVersion = 1
    public static let componentTypes: Set<String> = ["text", "image", "button", "stack", "lottie", "video", "spacer"]
    public static let persistentZones = ["navigation_bar", "footer", "overlay"]

    public struct FontReference: Sendable, Equatable {
        public let name: String
        public let url: String
        public let sha256: String?
    }

    /// Everything a document holds, behind one reference: a warm hands a
    /// document from the answer to the cache to the outcome, and a copy costs
    /// one retain, not one for each of its strings and arrays.
    private final class Storage: Sendable {
        let json: JSONValue
        let id: String
        let version: String
        let contentHash: String?
        let firstScreenImages: [String]
        let allImages: [String]
        let fonts: [FontReference]
        let unknownComponentTypes: [String]
        let encoded = EncodedFlow()

        init(
            json: JSONValue, id: String, version: String, contentHash: String?, firstScreenImages: [String],
            allImages: [String], fonts: [FontReference], unknownComponentTypes: [String]
        ) {
            (self.json, self.id, self.version, self.contentHash) = (json, id, version, contentHash)
            (self.firstScreenImages, self.allImages) = (firstScreenImages, allImages)
            (self.fonts, self.unknownComponentTypes) = (fonts, unknownComponentTypes)
        }
    }

    private let storage: Storage

    init(
        json: JSONValue, id: String, version: String, contentHash: String?, firstScreenImages: [String],
        allImages: [String], fonts: [FontReference], unknownComponentTypes: [String]
    ) {
        storage = Storage(
            json: json, id: id, version: version, contentHash: contentHash, firstScreenImages: firstScreenImages,
            allImages: allImages, fonts: fonts, unknownComponentTypes: unknownComponentTypes)
    }

    public var json: JSONValue { storage.json }
    public var id: String { storage.id }
    public var version: String { storage.version }
    public var contentHash: String? { storage.contentHash }
    /// Image URLs of `screens[0]` and every persistent zone, in document order, unique.
    public var firstScreenImages: [String] { storage.firstScreenImages }
    /// Image URLs of every screen and zone, in document order, unique.
    public var allImages: [String] { storage.allImages }
    public var fonts: [FontReference] { storage.fonts }

    /// Unknown component types (a forward-compatibility warning, not an error).
    public var unknownComponentTypes: [String] { storage.unknownComponentTypes }

    /// The canonical bytes of `json` and their SHA-256, computed once per document
    /// (a cache entry embeds them; a warm stores one document for many identities).
    var encoded: EncodedFlow { storage.encoded }

    var canonical: (data: Data, sha256: String) { encoded.value(for: json) }

    /// `sha256:` + hex of the canonical JSON of `json` without `content_hash`.
    public static func computeContentHash(_ json: JSONValue) -> String {
        var body = json
        if case .object(var members) = json {
            members.removeValue(forKey: "content_hash")
            body = .object(members)
        }
        return "sha256:" + Digest.sha256Hex(CanonicalJSON.data(body))
    }
}

extension FlowDocument {
    /// Validates a flow document. Returns the document when there are no errors,
    /// and every finding (errors and warnings), each naming its JSON path
    /// prefixed by `location` (`flows/x.json#/screens/0/...`).
    public static func validate(_ json: JSONValue, location: String) -> (FlowDocument?, [Finding]) {
        var v = FlowValidator(location: location)
        let doc = v.run(json)
        return (v.findings.hasErrors ? nil : doc, v.findings)
    }

    /// Parses and validates flow bytes. With `positions`, as for a flow read
    /// from a source directory, every finding also carries the line and
    /// column of the value it names (recorded by the one parse).
    public static func validate(data: Data, location: String, positions: Bool = false) -> (FlowDocument?, [Finding]) {
        let (doc, findings, _) = check(data: data, location: location, positions: positions)
        return (doc, findings)
    }

    /// `validate(data:location:positions:)`, with what the flow references
    /// whether or not it is valid (nil when it is not a JSON object), so a
    /// source's other rules (its assets, its fonts) run beside its errors.
    static func check(data: Data, location: String, positions: Bool) -> (FlowDocument?, [Finding], FlowReferences?) {
        let json: JSONValue
        let recorded: JSONPositions?
        do {
            (json, recorded) = try JSONValue.parse(data, positions: positions)
        } catch {
            var finding = Finding.error("flow-json", location, "\(error)")
            if positions { finding.position = (error as? JSONValue.ParseError)?.position(in: data) }
            return (nil, [finding], nil)
        }
        var v = FlowValidator(location: location)
        let doc = v.run(json)
        var findings = v.findings
        if let recorded { findings.locate(location, with: recorded) }
        return (findings.hasErrors ? nil : doc, findings, json.objectValue == nil ? nil : v.references)
    }
}

/// What a flow references, read by its validation whether or not it is
/// valid: each image with the pointer of its first `src`, each font it
/// declares with the pointer of its declaration, and the first component
/// naming each font.
struct FlowReferences: Sendable {
    /// False when a src or font url is no URL: it may have been meant for
    /// an asset, so which assets the flow uses is not all known.
    var complete = true
    var images: [(url: String, pointer: String)] = []
    var fonts: [(font: FlowDocument.FontReference, pointer: String)] = []
    /// Font name (its bytes) -> the pointer of the first component's `font` naming it.
    var fontUses: [ExactName: String] = [:]
}

/// Walks one flow document collecting findings, the rules in the order a
/// reader of the schema meets them; each finding names its JSON pointer.
private struct FlowValidator {
    let location: String
    var findings: [Finding] = []
    var firstScreenImages: [String] = []
    var allImages: [String] = []
    var usedFonts: [(name: String, path: String)] = []
    var navigations: [(screen: String, path: String)] = []
    var unknownTypes: [String] = []
    var references = FlowReferences()

    init(location: String) { self.location = location }

    mutating func error(_ rule: String, _ pointer: String, _ message: String) {
        findings.append(.error(rule, "\(location)#\(pointer)", message))
    }

    mutating func run(_ json: JSONValue) -> FlowDocument? {
        guard case .object(let doc) = json else {
            error("flow-type", "", "a flow must be a JSON object, found \(json.typeName)")
            return nil
        }
        checkSchemaVersion(doc["schema_version"])
        let id = nonEmptyString(doc["id"], "/id")
        let version = nonEmptyString(doc["version"], "/version")
        let contentHash = checkContentHash(doc["content_hash"], of: json)
        let declaredFonts = fonts(doc["fonts"])
        let screenIDs = screens(doc["screens"])
        persistentZones(doc["persistent_zones"])
        experiment(doc["experiment"])
        // Names, ids and urls are their bytes, as the SDK compares them (`String ==` is Unicode equivalence).
        for use in usedFonts where !declaredFonts.contains(where: { $0.name.sameBytes(as: use.name) }) {
            error("flow-font-undeclared", use.path, "font '\(use.name)' is not declared in /fonts")
        }
        for nav in navigations where screenIDs[ExactName(nav.screen)] == nil {
            error("flow-navigate", nav.path, "navigate targets screen '\(nav.screen)', which does not exist")
        }
        guard let id, let version else { return nil }
        return FlowDocument(
            json: json, id: id, version: version, contentHash: contentHash,
            firstScreenImages: unique(firstScreenImages), allImages: unique(allImages),
            fonts: declaredFonts, unknownComponentTypes: unique(unknownTypes))
    }

    /// 1 is read; a newer whole number asks for a newer fpctl.
    mutating func checkSchemaVersion(_ value: JSONValue?) {
        let supported = Double(FlowDocument.supportedSchemaVersion)
        switch (value, value?.numberValue) {
        case (_, let n?) where n == supported:
            break
        case (let newer?, let n?) where n > supported && n.rounded() == n:
            error(
                "flow-schema-version", "/schema_version",
                "schema_version \(CanonicalJSON.string(newer)) is newer than this fpctl understands (1); upgrade fpctl"
            )
        case (nil, _):
            error("flow-schema-version", "/schema_version", "missing schema_version (expected 1)")
        case (let other?, _):
            error(
                "flow-schema-version", "/schema_version",
                "unsupported schema_version \(CanonicalJSON.string(other)) (expected 1)")
        }
    }

    /// The declared content hash, which must match the document's canonical form.
    mutating func checkContentHash(_ value: JSONValue?, of json: JSONValue) -> String? {
        guard let value else { return nil }
        guard let declared = value.stringValue else {
            error("flow-content-hash", "/content_hash", "content_hash must be a string")
            return nil
        }
        let actual = FlowDocument.computeContentHash(json)
        if declared != actual {
            error(
                "flow-content-hash", "/content_hash", "content_hash \(declared) does not match the document (\(actual))"
            )
        }
        return declared
    }

    /// A non-empty array of screens with unique ids (by their bytes): screen id -> index.
    mutating func screens(_ value: JSONValue?) -> [ExactName: Int] {
        guard let screens = value?.arrayValue, !screens.isEmpty else {
            error("flow-screens", "/screens", "screens must be a non-empty array")
            return [:]
        }
        var screenIDs: [ExactName: Int] = [:]
        for (i, screen) in screens.enumerated() {
            let pointer = "/screens/\(i)"
            guard case .object(let s) = screen else {
                error("flow-screen", pointer, "a screen must be an object")
                continue
            }
            if let sid = nonEmptyString(s["id"], pointer + "/id") {
                if let first = screenIDs[ExactName(sid)] {
                    error(
                        "flow-duplicate-screen", pointer + "/id",
                        "screen id '\(sid)' is already used by /screens/\(first)")
                } else {
                    screenIDs[ExactName(sid)] = i
                }
            }
            components(s["components"], pointer + "/components", firstScreen: i == 0)
        }
        return screenIDs
    }

    /// Navigation bar, footer, overlay: part of the first screen's media.
    mutating func persistentZones(_ value: JSONValue?) {
        guard let value else { return }
        guard case .object(let zones) = value else {
            error("flow-zones", "/persistent_zones", "persistent_zones must be an object")
            return
        }
        for name in CanonicalJSON.sortedKeys(zones.keys) {
            components(zones[ExactName(name)], "/persistent_zones/\(name)", firstScreen: true)
        }
    }

    /// `{"id": …, "variant": …}`, both strings, when the backend put the user in an experiment.
    mutating func experiment(_ value: JSONValue?) {
        guard let value else { return }
        guard case .object = value else {
            error("flow-field-type", "/experiment", "experiment must be an object, found \(value.typeName)")
            return
        }
        for key in ["id", "variant"] {
            if let field = value[key], field.stringValue == nil {
                error("flow-field-type", "/experiment/\(key)", "\(key) must be a string, found \(field.typeName)")
            }
        }
    }

    mutating func nonEmptyString(_ value: JSONValue?, _ pointer: String) -> String? {
        guard let s = value?.stringValue, !s.isEmpty else {
            error("flow-field", pointer, value == nil ? "missing required string" : "must be a non-empty string")
            return nil
        }
        return s
    }

    mutating func fonts(_ value: JSONValue?) -> [FlowDocument.FontReference] {
        guard let value else { return [] }
        guard let list = value.arrayValue else {
            error("flow-fonts", "/fonts", "fonts must be an array")
            return []
        }
        var out: [FlowDocument.FontReference] = []
        for (i, f) in list.enumerated() {
            let pointer = "/fonts/\(i)"
            guard let name = nonEmptyString(f["name"], pointer + "/name"),
                let url = f["url"]?.stringValue, isAbsoluteHTTP(url)
            else {
                if f["url"]?.stringValue.map(isAbsoluteHTTP) != true {
                    error("flow-font-url", pointer + "/url", "a font needs an absolute http(s) url")
                    references.complete = false
                }
                continue
            }
            var sha: String?
            if let s = f["sha256"] {
                if let hex = s.stringValue, hex.count == 64, hex.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) {
                    sha = hex
                } else {
                    error("flow-font-sha256", pointer + "/sha256", "sha256 must be 64 lowercase hex digits")
                }
            }
            out.append(.init(name: name, url: url, sha256: sha))
            references.fonts.append((out[out.count - 1], pointer))
        }
        return out
    }

    mutating func components(_ value: JSONValue?, _ pointer: String, firstScreen: Bool) {
        guard let value else { return }
        guard let list = value.arrayValue else {
            error("flow-components", pointer, "components must be an array")
            return
        }
        for (i, c) in list.enumerated() {
            component(c, "\(pointer)/\(i)", firstScreen: firstScreen)
        }
    }

    mutating func component(_ c: JSONValue, _ pointer: String, firstScreen: Bool) {
        guard case .object(let comp) = c else {
            error("flow-component", pointer, "a component must be an object")
            return
        }
        guard let type = comp["type"]?.stringValue else {
            error("flow-component", pointer + "/type", "a component needs a string type")
            return
        }
        if !FlowDocument.componentTypes.contains(type) {
            findings.append(
                .warning("flow-component-type", "\(location)#\(pointer)/type", "unknown component type '\(type)'"))
            unknownTypes.append(type)
        }
        if ["image", "lottie", "video"].contains(type) {
            if let src = comp["src"]?.stringValue, isAbsoluteHTTP(src) {
                if type == "image" {
                    allImages.append(src)
                    if firstScreen { firstScreenImages.append(src) }
                    references.images.append((src, pointer + "/src"))
                }
            } else {
                error("flow-media-src", pointer + "/src", "\(type) needs an absolute http(s) src")
                references.complete = false
            }
        }
        if let text = comp["text"], text.stringValue == nil {
            error("flow-field-type", pointer + "/text", "text must be a string, found \(text.typeName)")
        }
        if let font = comp["font"] {
            if let name = font.stringValue {
                usedFonts.append((name, pointer + "/font"))
                if references.fontUses[ExactName(name)] == nil {
                    references.fontUses[ExactName(name)] = pointer + "/font"
                }
            } else {
                error("flow-font-undeclared", pointer + "/font", "font must be a string naming a declared font")
            }
        }
        if let action = comp["action"] {
            self.action(action, pointer + "/action")
        }
        if let children = comp["children"] {
            components(children, pointer + "/children", firstScreen: firstScreen)
        }
    }

    mutating func action(_ a: JSONValue, _ pointer: String) {
        guard let type = a["type"]?.stringValue else {
            error("flow-action", pointer + "/type", "an action needs a string type")
            return
        }
        func requireString(_ key: String) -> String? {
            guard let s = a[key]?.stringValue, !s.isEmpty else {
                error("flow-action", "\(pointer)/\(key)", "\(type) action needs a non-empty string '\(key)'")
                return nil
            }
            return s
        }
        switch type {
        case "purchase": _ = requireString("product_id")
        case "restore", "dismiss": break
        case "navigate":
            if let screen = requireString("screen") { navigations.append((screen, pointer + "/screen")) }
        case "open_link":
            if let url = requireString("url"), URL(string: url)?.scheme == nil {
                error("flow-action", pointer + "/url", "open_link needs an absolute url")
            }
        case "call_delegate": _ = requireString("message")
        default:
            error("flow-action", pointer + "/type", "unknown action type '\(type)'")
        }
    }

    func isAbsoluteHTTP(_ s: String) -> Bool {
        guard let url = URL(string: s), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty
        else { return false }
        return true
    }

    /// The first of each, by bytes.
    func unique(_ list: [String]) -> [String] {
        var seen = Set<ExactName>()
        return list.filter { seen.insert(ExactName($0)).inserted }
    }
}

/// `FlowDocument.canonical`, filled on first use.
final class EncodedFlow: Sendable {
    private let cached = Mutex<(data: Data, sha256: String)?>(nil)

    func value(for json: JSONValue) -> (data: Data, sha256: String) {
        if let value = cached.withLock({ $0 }) { return value }
        let data = CanonicalJSON.data(json)
        let value = (data, Digest.sha256Hex(data))
        cached.withLock { $0 = value }
        return value
    }
}
