import Foundation
import Synchronization

/// One cached flow as its file name describes it (no file read needed).
public struct CachedFlow: Sendable {
    /// The fields behind one reference: an entry is handed from the cache's
    /// staging to the alias writer and the outcome, and a copy costs one
    /// retain, not one for each of its strings.
    private final class Storage: Sendable {
        let placement: String
        let fingerprint: String
        let userID: String?
        let flowID: String
        let version: String
        let resolvedAt: Date
        let ttlSeconds: Int
        let size: Int64
        let path: String
        let inLog: Bool
        let flowSHA256: String?

        init(
            placement: String, fingerprint: String, userID: String?, flowID: String, version: String,
            resolvedAt: Date, ttlSeconds: Int, size: Int64, path: String, inLog: Bool, flowSHA256: String?
        ) {
            (self.placement, self.fingerprint, self.userID, self.flowID) = (placement, fingerprint, userID, flowID)
            (self.version, self.resolvedAt, self.ttlSeconds, self.size) = (version, resolvedAt, ttlSeconds, size)
            (self.path, self.inLog, self.flowSHA256) = (path, inLog, flowSHA256)
        }

        func with(inLog: Bool) -> Storage {
            Storage(
                placement: placement, fingerprint: fingerprint, userID: userID, flowID: flowID, version: version,
                resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, size: size, path: path, inLog: inLog,
                flowSHA256: flowSHA256)
        }
    }

    private var storage: Storage

    public init(
        placement: String, fingerprint: String, userID: String?, flowID: String, version: String, resolvedAt: Date,
        ttlSeconds: Int, size: Int64, path: String
    ) {
        self.init(
            placement: placement, fingerprint: fingerprint, userID: userID, flowID: flowID, version: version,
            resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, size: size, path: path, inLog: false, flowSHA256: nil)
    }

    init(
        placement: String, fingerprint: String, userID: String?, flowID: String, version: String, resolvedAt: Date,
        ttlSeconds: Int, size: Int64, path: String, inLog: Bool, flowSHA256: String?
    ) {
        storage = Storage(
            placement: placement, fingerprint: fingerprint, userID: userID, flowID: flowID, version: version,
            resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, size: size, path: path, inLog: inLog,
            flowSHA256: flowSHA256)
    }

    public var placement: String { storage.placement }
    public var fingerprint: String { storage.fingerprint }
    /// nil when the user id was too long to keep in a name.
    public var userID: String? { storage.userID }
    public var flowID: String { storage.flowID }
    public var version: String { storage.version }
    public var resolvedAt: Date { storage.resolvedAt }
    public var ttlSeconds: Int { storage.ttlSeconds }
    public var size: Int64 { storage.size }
    /// Format 1: the entry's file. Format 2: `<cache>/log/<segment>#<offset>`, where its record is.
    public var path: String { storage.path }
    /// Whether the entry is a record of a format-2 cache's log, not a file of its own.
    var inLog: Bool {
        get { storage.inLog }
        set { storage = storage.with(inLog: newValue) }
    }
    /// Format 2: the name of the flow's object (its SHA-256).
    var flowSHA256: String? { storage.flowSHA256 }

    /// The key directory's name, `<fingerprint>~<user>` (in format 2, the name it would have).
    public var keyName: String {
        if inLog { return "\(fingerprint)~\(CacheNames.bounded(userID ?? "", max: CacheStore.maxNameField))" }
        return PathName.parent(of: path).split(separator: "/").last.map(String.init) ?? ""
    }

    /// `<placement dir>/<fingerprint>~<user>`, as the path names them: what an alias points at.
    var directoryKey: String {
        if inLog { return CacheNames.placement(placement) + "/" + keyName }
        let keyDir = PathName.parent(of: path)
        return PathName.lastComponent(of: PathName.parent(of: keyDir)) + "/" + PathName.lastComponent(of: keyDir)
    }

    /// A name's field too long to carry its value is a hash (`#…`): the
    /// entry's JSON holds the value. The same entry with the values read
    /// from it, or unchanged when nothing was hashed or the file cannot be read.
    func withFullValues() -> CachedFlow {
        guard !inLog, placement.hasPrefix("#") || userID == nil || flowID.hasPrefix("#") || version.hasPrefix("#"),
            let data = FileManager.default.contents(atPath: path), let json = try? JSONValue.parse(data),
            let fullPlacement = json["placement"]?.stringValue, let fullUser = json["user_id"]?.stringValue,
            let fullFlowID = json["flow_id"]?.stringValue, let fullVersion = json["version"]?.stringValue,
            json["fingerprint"]?.stringValue.sameBytes(as: fingerprint) == true,
            placement.sameBytes(as: fullPlacement) || CacheNames.placement(fullPlacement).sameBytes(as: placement)
        else { return self }
        return CachedFlow(
            placement: fullPlacement, fingerprint: fingerprint, userID: fullUser, flowID: fullFlowID,
            version: fullVersion, resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, size: size, path: path)
    }

    /// How far ahead of this clock another writer's may run: an entry
    /// resolved up to this long in the future counts as resolved now; one
    /// further ahead is from the future (docs/cache-format.md, "Time").
    public static let clockSkew: TimeInterval = 60

    /// `now - resolved_at`: negative for an entry from another writer's future.
    public func age(at now: Date) -> TimeInterval { now.timeIntervalSince(resolvedAt) }
    /// Resolved more than `clockSkew` after `now`: a writer's clock ran ahead.
    /// Such an entry is never fresh (it would stay fresh past its TTL); it is
    /// stale, listed, flagged by `verify` and pruned by any `--older-than`.
    public func isFromFuture(at now: Date) -> Bool { age(at: now) < -Self.clockSkew }
    /// Fresh while `now - resolved_at < ttl`, and not from the future.
    public func isFresh(at now: Date) -> Bool { Self.isFresh(resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, at: now) }

    /// `isFresh(at:)` of an entry resolved at `resolvedAt` with `ttlSeconds`
    /// (`ResolvedWithTTL` gives it to an entry's other shapes).
    static func isFresh(resolvedAt: Date, ttlSeconds: Int, at now: Date) -> Bool {
        // Within the skew, resolved ahead counts as resolved now (age 0): a TTL of 0 is never fresh.
        let age = now.timeIntervalSince(resolvedAt)
        return age >= -clockSkew && max(age, 0) < TimeInterval(ttlSeconds)
    }
}

extension CacheStore {
    static let maxNameField = 120

    func placementDir(_ placement: String) -> String { "\(flowsDir)/\(CacheNames.placement(placement))" }

    func keyDirName(fingerprint: String, userID: String) -> String {
        "\(fingerprint)~\(CacheNames.bounded(userID, max: Self.maxNameField))"
    }

    /// `<stamp>~<ttl>~<flow id>~<version>.json`, each field within
    /// `maxNameField` bytes and the whole within `NAME_MAX`: where two
    /// fields of 120 bytes would pass it, both are hashed.
    static func entryName(stamp: String, ttlSeconds: Int, flowID: String, version: String) -> String {
        let prefix = stamp + "~" + String(max(0, ttlSeconds)) + "~"
        let name =
            prefix + CacheNames.bounded(flowID, max: maxNameField) + "~"
            + CacheNames.bounded(version, max: maxNameField) + ".json"
        if name.utf8.count <= CacheNames.maxName { return name }
        return prefix + CacheNames.hashed(flowID) + "~" + CacheNames.hashed(version) + ".json"
    }

    /// The entry file's bytes: canonical JSON whose `flow` member is the
    /// document's canonical bytes, spliced in rather than encoded again, the
    /// members written in their canonical order.
    static func entryData(
        placement: String, identity: Identity, document: FlowDocument, ttlSeconds: Int, tier: Tier, resolvedAt: Date
    ) -> Data {
        let flow = document.canonical
        var entry = CanonicalJSON.SortedObject(capacity: flow.data.count + 512)
        if let hash = document.contentHash {
            entry.string("content_hash", hash)
        } else {
            entry.raw("content_hash", "null".utf8)
        }
        entry.string("fingerprint", identity.fingerprint)
        entry.raw("flow", flow.data)
        entry.string("flow_id", document.id)
        entry.string("flow_sha256", flow.sha256)
        entry.string("placement", placement)
        entry.string("resolved_at", RFC3339.string(resolvedAt))
        entry.raw("schema_version", "1".utf8)
        entry.string("tier", tier.rawValue)
        entry.integer("ttl_seconds", ttlSeconds)
        entry.string("user_id", identity.userID)
        entry.string("version", document.version)
        return entry.finish()
    }

    /// Reads and checks an entry file: metadata agrees with its name, the flow's
    /// bytes match `flow_sha256`, the flow validates. Anything else: nil.
    static func readEntry(_ entry: CachedFlow) -> (FlowDocument, Int64)? {
        if let (doc, size, problem) = inspectEntry(entry), problem == nil, let doc { return (doc, size) }
        return nil
    }

    /// As `readEntry`, but says what is wrong (for `cache verify`).
    static func inspectEntry(_ entry: CachedFlow) -> (FlowDocument?, Int64, String?)? {
        guard let data = FileManager.default.contents(atPath: entry.path) else { return (nil, 0, "unreadable") }
        return inspectEntry(entry, data: data)
    }

    /// An entry file's bytes against the metadata its name carries.
    static func inspectEntry(_ entry: CachedFlow, data: Data) -> (FlowDocument?, Int64, String?) {
        guard let json = try? JSONValue.parse(data) else {
            return (nil, Int64(data.count), "not valid JSON (truncated or corrupt)")
        }
        guard let placement = json["placement"]?.stringValue,
            placement.sameBytes(as: entry.placement) || CacheNames.placement(placement).sameBytes(as: entry.placement),
            json["fingerprint"]?.stringValue.sameBytes(as: entry.fingerprint) == true,
            let flowID = json["flow_id"]?.stringValue,
            flowID.sameBytes(as: entry.flowID)
                || (entry.flowID.hasPrefix("#") && CacheNames.hashed(flowID).sameBytes(as: entry.flowID)),
            json["ttl_seconds"]?.numberValue == Double(entry.ttlSeconds), let flow = json["flow"]
        else {
            return (nil, Int64(data.count), "metadata disagrees with the file name")
        }
        guard json["flow_sha256"]?.stringValue == Digest.sha256Hex(CanonicalJSON.data(flow)) else {
            return (nil, Int64(data.count), "flow bytes do not match flow_sha256")
        }
        let (doc, findings) = FlowDocument.validate(flow, location: entry.path)
        guard let doc else { return (nil, Int64(data.count), "flow fails validation: \(findings.first?.line ?? "")") }
        return (doc, Int64(data.count), nil)
    }

    /// `<stamp ms>~<unique>~<ttl>~<flow id>~<version>.json` in `<fingerprint>~<user>`.
    static func parseEntryName(placement: String, keyDir: String, name: String, size: Int64, path: String)
        -> CachedFlow?
    {
        guard name.hasSuffix(".json") else { return nil }
        let fields = name.dropLast(5).split(separator: "~", omittingEmptySubsequences: false)
        let key = keyDir.split(separator: "~", maxSplits: 1, omittingEmptySubsequences: false)
        guard fields.count == 5, key.count == 2, key[0].count == 64,
            let resolvedAt = CacheNames.parseStamp(fields[0]), let ttl = Int(fields[2]),
            let flowID = fields[3].hasPrefix("#") ? String(fields[3]) : CacheNames.decode(fields[3]),
            let version = fields[4].hasPrefix("#") ? String(fields[4]) : CacheNames.decode(fields[4])
        else { return nil }
        let user = key[1].hasPrefix("#") ? nil : CacheNames.decode(key[1])
        return CachedFlow(
            placement: placement, fingerprint: String(key[0]), userID: user, flowID: flowID, version: version,
            resolvedAt: resolvedAt, ttlSeconds: ttl, size: size, path: path)
    }
}

/// An entry's time and TTL in any of its shapes (`CacheScan.EntryFacts`,
/// `ListedFields`): fresh as `CachedFlow.isFresh` says, the one rule.
public protocol ResolvedWithTTL {
    var resolvedAt: Date { get }
    var ttlSeconds: Int { get }
}

extension ResolvedWithTTL {
    public func isFresh(at now: Date) -> Bool {
        CachedFlow.isFresh(resolvedAt: resolvedAt, ttlSeconds: ttlSeconds, at: now)
    }
}
