import Foundation

/// The `cache put` input: JSON Lines of entries to write as the SDK would
/// (docs/cache-format.md). A flow line is `{"placement", "user_id",
/// "attributes"?, "ttl_seconds"?, "flow" or "flow_file", "resolved_at"?}`; an
/// image line is `{"image_url", "image_file"}`. Lines are written as they are
/// read and made durable in groups (`GroupCommit`), so a bad line stops the
/// run with the lines before it written and durable.
public struct CachePutInput {
    private let store: CacheStore
    /// Files named by several lines are read and validated once.
    private var flowFiles: [ExactName: FlowDocument] = [:]
    private var imageFiles: [ExactName: Data] = [:]
    /// Each placement's last flow line, for its last-known-good alias.
    private var lastEntry: [ExactName: CachedFlow] = [:]
    /// The keys written since everything written before was last known durable.
    private var waitingKeys = Set<ExactName>()
    /// A pinned now (`FPCTL_NOW`), else the clock as each line is written:
    /// the `resolved_at` of lines without one.
    public var now: Date?

    public init(store: CacheStore) { self.store = store }

    /// Writes every line of `handle` (named `name` in findings) into the store;
    /// returns the number of entries written. A bad line is `FPError.invalid`
    /// naming `name:line` (rules `put-image`, `put-field`, `put-flow`).
    public mutating func write(_ handle: FileHandle, name: String) throws -> Int {
        var count = 0
        // Each entry waiting for its commit holds its file and a lock descriptor: as many as the open-files limit allows.
        let outstanding = GroupCommit.Outstanding(limit: max(1, min(1024, (Platform.freeDescriptors() ?? 2048) / 2)))
        do {
            try JSONLines.forEach(handle, name: name) { lineNumber, json in
                try write(json, at: "\(name):\(lineNumber)", outstanding: outstanding)
                count += 1
            }
        } catch {
            // The lines before the bad one are still written: wait for them, then report the line.
            try outstanding.wait()
            try pointAliases()
            throw error
        }
        try outstanding.wait()
        try pointAliases()
        store.finishWriting()
        return count
    }

    private mutating func pointAliases() throws {
        for entry in lastEntry.sorted(by: { $0.key < $1.key }).map(\.value) {
            try store.pointAliasIfPresent(to: entry)
        }
        lastEntry = [:]
    }

    private mutating func write(_ json: JSONValue, at: String, outstanding: GroupCommit.Outstanding) throws {
        if let url = json["image_url"]?.stringValue {
            guard let file = json["image_file"]?.stringValue,
                let data = imageFiles[ExactName(file)] ?? FileManager.default.contents(atPath: file)
            else {
                throw FPError.invalid([.error("put-image", at, "image_file missing or unreadable")])
            }
            imageFiles[ExactName(file)] = data
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
        let resolvedAt = try Self.resolvedAt(json["resolved_at"], at: at, now: now ?? Date())
        let ttl: Int
        switch TTL.read(json["ttl_seconds"], field: "ttl_seconds") {
        case .success(let seconds): ttl = seconds ?? 300
        case .failure(let problem): throw FPError.invalid([.error("put-field", at, problem.message)])
        }
        // A key already waiting for its commit is waited for first, so the later line wins, as it would
        // written one at a time (each write removes the key's other files).
        let key = ExactName("\(placement)\u{0}\(identity.fingerprint)")
        // (And every 4,096 keys, so that the set stays small on a long input.)
        if waitingKeys.contains(key) || waitingKeys.count >= 4096 {
            try outstanding.wait()
            waitingKeys = []
        }
        waitingKeys.insert(key)
        outstanding.begin()
        let entry: CachedFlow
        do {
            entry = try store.storeFlow(
                placement: placement, identity: identity, document: doc, ttlSeconds: ttl, tier: .network,
                resolvedAt: resolvedAt, commit: .shared, waiter: outstanding)
        } catch {
            outstanding.cancel()
            throw error
        }
        // Each placement's alias points at its last line's entry, once that is durable (`pointAliases`).
        lastEntry[ExactName(placement)] = entry
    }

    /// `resolved_at`: an RFC 3339 time from 1970 (the cache's names count
    /// milliseconds since then); now when the line has none. A time in the
    /// future is kept: the entry is stale beyond `CachedFlow.clockSkew`.
    static func resolvedAt(_ value: JSONValue?, at: String, now: Date) throws -> Date {
        guard let value, value != .null else { return now }
        guard let text = value.stringValue, let date = RFC3339.parse(text) else {
            throw FPError.invalid([.error("put-field", at, "resolved_at must be an RFC 3339 time")])
        }
        guard date.timeIntervalSince1970 >= 0 else {
            throw FPError.invalid([.error("put-field", at, "resolved_at \(text) is before 1970")])
        }
        // A time ahead of this clock is written as given, as warm on a pod whose clock runs ahead
        // writes it: the one rule for time (CachedFlow.isFresh) makes it stale beyond the skew.
        return date
    }

    /// The line's flow, inline or from `flow_file`; nil when missing or invalid.
    private mutating func flow(_ json: JSONValue, at: String) -> FlowDocument? {
        if let file = json["flow_file"]?.stringValue {
            if flowFiles[ExactName(file)] == nil, let data = FileManager.default.contents(atPath: file) {
                flowFiles[ExactName(file)] = FlowDocument.validate(data: data, location: file).0
            }
            return flowFiles[ExactName(file)]
        }
        return json["flow"].flatMap { FlowDocument.validate($0, location: at).0 }
    }
}
