import Foundation

/// The `cache put` input: JSON Lines of entries to write as the SDK would
/// (docs/cache-format.md). A flow line is `{"placement", "user_id",
/// "attributes"?, "ttl_seconds"?, "flow" or "flow_file", "resolved_at"?}`; an
/// image line is `{"image_url", "image_file"}`. Lines are written as they are
/// read, so a bad line stops the run with the lines before it written.
public struct CachePutInput {
    private let store: CacheStore
    /// Files named by several lines are read and validated once.
    private var flowFiles: [String: FlowDocument] = [:]
    private var imageFiles: [String: Data] = [:]

    public init(store: CacheStore) { self.store = store }

    /// Writes every line of `handle` (named `name` in findings) into the store;
    /// returns the number of entries written. A bad line is `FPError.invalid`
    /// naming `name:line` (rules `put-image`, `put-field`, `put-flow`).
    public mutating func write(_ handle: FileHandle, name: String) throws -> Int {
        var count = 0
        try JSONLines.forEach(handle, name: name) { lineNumber, json in
            try write(json, at: "\(name):\(lineNumber)")
            count += 1
        }
        return count
    }

    private mutating func write(_ json: JSONValue, at: String) throws {
        if let url = json["image_url"]?.stringValue {
            guard let file = json["image_file"]?.stringValue,
                let data = imageFiles[file] ?? FileManager.default.contents(atPath: file)
            else {
                throw FPError.invalid([.error("put-image", at, "image_file missing or unreadable")])
            }
            imageFiles[file] = data
            try store.storeImage(url: url, data: data)
            return
        }
        guard let placement = json["placement"]?.stringValue, let user = json["user_id"]?.stringValue else {
            throw FPError.invalid([.error("put-field", at, "a flow line needs placement and user_id strings")])
        }
        guard let doc = flow(json, at: at) else {
            throw FPError.invalid([.error("put-flow", at, "flow missing or invalid")])
        }
        let identity = Identity(userID: user, attributes: json["attributes"]?.objectValue ?? [:])
        let resolvedAt = json["resolved_at"]?.stringValue.flatMap(RFC3339.parse) ?? Date()
        let ttlValue = json["ttl_seconds"]?.numberValue ?? 300
        guard let ttl = TTL.seconds(ttlValue) else {
            throw FPError.invalid([.error("put-field", at, TTL.outOfRange("ttl_seconds", ttlValue))])
        }
        try store.storeFlow(
            placement: placement, identity: identity, document: doc,
            ttlSeconds: ttl, tier: .network, resolvedAt: resolvedAt)
    }

    /// The line's flow, inline or from `flow_file`; nil when missing or invalid.
    private mutating func flow(_ json: JSONValue, at: String) -> FlowDocument? {
        if let file = json["flow_file"]?.stringValue {
            if flowFiles[file] == nil, let data = FileManager.default.contents(atPath: file) {
                flowFiles[file] = FlowDocument.validate(data: data, location: file).0
            }
            return flowFiles[file]
        }
        return json["flow"].flatMap { FlowDocument.validate($0, location: at).0 }
    }
}
