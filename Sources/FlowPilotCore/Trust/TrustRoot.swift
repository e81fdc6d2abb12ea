import Crypto
import Foundation

/// What is wrong with a trust root or a signature block: the rule it breaks
/// (fpctl-bundle(5), "Rules") and a message naming the version, key or field.
public struct TrustProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public let rule: String
    public let message: String
    init(_ rule: String, _ message: String) { (self.rule, self.message) = (rule, message) }
    public var description: String { "\(rule): \(message)" }
}

/// One version of a trust root's signed part (fpctl-trust(5)): the root keys
/// and how many of them must sign the next version, the signing keys the root
/// delegates to with each one's validity window, the keys it revoked, the app
/// it is for, the lowest bundle sequence it accepts, and its own expiry.
public struct TrustRoot: Sendable, Equatable {
    public struct Delegation: Sendable, Equatable {
        public var publicKey: Data
        public var notBefore: Date
        public var expires: Date
    }

    public static let type = "fpctl-trust-root"

    public var appID: String
    public var version: Int
    public var expires: Date
    public var minSequence: Int
    public var threshold: Int
    /// Key id to raw Ed25519 public key.
    public var rootKeys: [String: Data]
    public var signingKeys: [String: Delegation]
    public var revoked: Set<String>

    var json: JSONValue {
        .object([
            "type": .string(Self.type), "app_id": .string(appID), "version": .integer(Int64(version)),
            "expires": .string(RFC3339.string(expires)), "min_sequence": .integer(Int64(minSequence)),
            "threshold": .integer(Int64(threshold)),
            "root_keys": .object(rootKeys.mapValues { JSONValue.string($0.base64EncodedString()) }.exactKeys),
            "signing_keys": .object(
                signingKeys.mapValues {
                    JSONValue.object([
                        "public_key": .string($0.publicKey.base64EncodedString()),
                        "not_before": .string(RFC3339.string($0.notBefore)),
                        "expires": .string(RFC3339.string($0.expires)),
                    ])
                }.exactKeys),
            "revoked": .array(CanonicalJSON.sortedKeys(revoked).map(JSONValue.string)),
        ])
    }

    /// The bytes a root key signs: the canonical JSON of `json`.
    public var signedBytes: Data { CanonicalJSON.data(json) }

    static func parse(_ value: JSONValue, at place: String) throws(TrustProblem) -> TrustRoot {
        func bad(_ field: String, _ what: String) -> TrustProblem {
            TrustProblem("trust-root-format", "\(place).\(field): \(what)")
        }
        guard let object = value.objectValue else { throw bad("signed", "not an object") }
        let known: Set = [
            "type", "app_id", "version", "expires", "min_sequence", "threshold", "root_keys", "signing_keys", "revoked",
        ]
        if let extra = CanonicalJSON.sortedKeys(object.keys).first(where: { !known.contains($0) }) {
            throw bad(extra, "not a trust root field (a newer fpctl's?)")
        }
        guard object["type"]?.stringValue == type else { throw bad("type", "must be \"\(type)\"") }
        guard let app = object["app_id"]?.stringValue, !app.isEmpty else { throw bad("app_id", "a non-empty string") }
        let version = try whole(object["version"], 1, bad("version", "a whole number from 1 to 2^53 - 1, in digits"))
        let expires = try time(object["expires"], bad("expires", "an RFC 3339 time"))
        let minimum = try whole(
            object["min_sequence"], 0, bad("min_sequence", "a whole number from 0 to 2^53 - 1, in digits"))
        let threshold = try whole(
            object["threshold"], 1, bad("threshold", "a whole number from 1 to 2^53 - 1, in digits"))
        guard let rootObject = object["root_keys"]?.objectValue else { throw bad("root_keys", "an object") }
        var roots: [String: Data] = [:]
        for (name, value) in rootObject {
            let id = name.string
            roots[id] = try key(id, value, bad("root_keys.\(id)", "the base64 of a key whose id is \(id)"))
        }
        guard threshold <= roots.count else {
            throw bad("threshold", "\(threshold), more than its \(roots.count) root keys could meet")
        }
        guard let signingObject = object["signing_keys"]?.objectValue else { throw bad("signing_keys", "an object") }
        var signing: [String: Delegation] = [:]
        for (name, value) in signingObject {
            let id = name.string
            let at = "signing_keys.\(id)"
            guard let d = value.objectValue, d.count == 3 else {
                throw bad(at, "an object of public_key, not_before and expires")
            }
            let raw = try key(
                id, d["public_key"] ?? .null, bad(at + ".public_key", "the base64 of a key whose id is \(id)"))
            signing[id] = Delegation(
                publicKey: raw, notBefore: try time(d["not_before"], bad(at + ".not_before", "an RFC 3339 time")),
                expires: try time(d["expires"], bad(at + ".expires", "an RFC 3339 time")))
        }
        guard let revokedArray = object["revoked"]?.arrayValue else { throw bad("revoked", "an array of key ids") }
        var revoked = Set<String>()
        for item in revokedArray {
            guard let id = item.stringValue, isKeyID(id) else { throw bad("revoked", "an array of key ids") }
            revoked.insert(id)
        }
        if let both = CanonicalJSON.sortedKeys(revoked.intersection(signing.keys)).first {
            throw bad("revoked", "key \(both) is both revoked and delegated")
        }
        return TrustRoot(
            appID: app, version: version, expires: expires, minSequence: minimum, threshold: threshold,
            rootKeys: roots, signingKeys: signing, revoked: revoked)
    }

    static func isKeyID(_ s: String) -> Bool {
        s.utf8.count == 16 && s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    private static func key(_ id: String, _ value: JSONValue, _ problem: TrustProblem) throws(TrustProblem) -> Data {
        guard let raw = value.stringValue.flatMap({ Data(base64Encoded: $0) }), raw.count == 32,
            (try? Curve25519.Signing.PublicKey(rawRepresentation: raw)) != nil, SigningKey.keyID(raw: raw) == id
        else { throw problem }
        return raw
    }

    /// The largest sequence, version, min_sequence or threshold a statement or
    /// a root may hold: 2^53 - 1, the largest integer every JSON reader keeps
    /// exactly (RFC 7493, I-JSON), so a verifier in any language reads the
    /// number fpctl signed. `bundle sign` and `trust` refuse a larger one (64)
    /// before writing anything.
    public static let largestWhole = 9_007_199_254_740_991

    /// A whole number in `lowest...largestWhole`, written as digits alone
    /// (`JSONValue.integer`): `5.0`, `5e0` and `-0` are refused, so what is
    /// signed has one spelling.
    static func whole(_ value: JSONValue?, _ lowest: Int, _ problem: TrustProblem) throws(TrustProblem) -> Int {
        guard let n = value?.integerValue, n >= lowest, n <= largestWhole else { throw problem }
        return Int(n)
    }

    /// Why a number given on the command line cannot be signed, or nil when it can.
    public static func outOfRange(_ option: String, _ value: Int, lowest: Int) -> String? {
        (lowest...largestWhole).contains(value)
            ? nil
            : "\(option) \(value) is out of range (\(lowest) to \(largestWhole), the integers every JSON reader keeps exactly)"
    }

    static func time(_ value: JSONValue?, _ problem: TrustProblem) throws(TrustProblem) -> Date {
        guard let text = value?.stringValue, let date = RFC3339.parse(text), RFC3339.string(date) == text else {
            throw problem
        }
        return date
    }
}

/// A root version with the signatures over its canonical bytes.
public struct SignedRoot: Sendable, Equatable {
    public struct Signature: Sendable, Equatable {
        public let keyID: String
        public let bytes: Data
    }

    public let root: TrustRoot
    public let signatures: [Signature]

    public init(root: TrustRoot, signatures: [Signature]) { (self.root, self.signatures) = (root, signatures) }

    /// The root signed by every key of `pairs`, in the order given.
    public init(root: TrustRoot, signedBy pairs: [SigningKey.Pair]) throws {
        let bytes = root.signedBytes
        self.root = root
        signatures = try pairs.map { Signature(keyID: $0.keyID, bytes: try $0.privateKey.signature(for: bytes)) }
    }

    var json: JSONValue {
        .object([
            "signed": root.json,
            "signatures": .array(
                signatures.map {
                    .object(["key_id": .string($0.keyID), "signature": .string($0.bytes.base64EncodedString())])
                }),
        ])
    }

    static func parse(_ value: JSONValue, at place: String) throws(TrustProblem) -> SignedRoot {
        guard let object = value.objectValue, object.count == 2, let signed = object["signed"],
            let list = object["signatures"]?.arrayValue
        else { throw TrustProblem("trust-root-format", "\(place): an object of signed and signatures") }
        let root = try TrustRoot.parse(signed, at: place + ".signed")
        var signatures: [Signature] = []
        for (i, item) in list.enumerated() {
            guard let s = item.objectValue, s.count == 2, let id = s["key_id"]?.stringValue,
                let bytes = s["signature"]?.stringValue.flatMap({ Data(base64Encoded: $0) })
            else {
                throw TrustProblem("trust-root-format", "\(place).signatures[\(i)]: an object of key_id and signature")
            }
            signatures.append(Signature(keyID: id, bytes: bytes))
        }
        return SignedRoot(root: root, signatures: signatures)
    }

    /// The distinct ids of `keys` whose signature over this version verifies:
    /// a key listed twice counts once (python-tuf's GHSA-r7vq-6425-j94w).
    public func signers(among keys: [String: Data]) -> Set<String> {
        signers(among: keys, over: root.signedBytes)
    }

    /// `signers` over bytes the caller made once (a walk asks twice of each version).
    func signers(among keys: [String: Data], over bytes: Data) -> Set<String> {
        var found = Set<String>()
        for s in signatures where !found.contains(s.keyID) {
            guard let raw = keys[s.keyID], let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw),
                key.isValidSignature(s.bytes, for: bytes)
            else { continue }
            found.insert(s.keyID)
        }
        return found
    }
}

/// `trust.json`: every version of a trust root, oldest first. The newest is
/// the root; the older ones let a validator that embeds any of them walk to it.
public struct TrustFile: Sendable, Equatable {
    public static let format = "fpctl-trust"

    public var roots: [SignedRoot]

    public init(roots: [SignedRoot]) { self.roots = roots }

    public var current: TrustRoot { roots[roots.count - 1].root }

    /// The file's bytes: pretty canonical JSON, so the same roots give the same bytes.
    public var data: Data {
        CanonicalJSON.prettyData(
            .object(["format": .string(Self.format), "roots": .array(roots.map(\.json))]))
    }

    /// The most root versions a trust.json or a bundle's manifest.sig may hold.
    public static let maxVersions = 1000
    /// The largest trust.json read (`input-size` above it).
    public static let maxFileBytes = 1 << 20

    static func parseRoots(_ value: JSONValue?, at place: String) throws(TrustProblem) -> [SignedRoot] {
        guard let list = value?.arrayValue, !list.isEmpty, list.count <= maxVersions else {
            throw TrustProblem("trust-root-format", "\(place): a list of 1 to \(maxVersions) root versions")
        }
        var roots: [SignedRoot] = []
        for (i, item) in list.enumerated() { roots.append(try SignedRoot.parse(item, at: "\(place)[\(i)]")) }
        return roots
    }

    /// Parses and checks a trust file: its first version signed by a threshold
    /// of its own root keys, each later one as `walk` checks it.
    public static func parse(_ data: Data) throws(TrustProblem) -> TrustFile {
        guard let json = try? JSONValue.parse(data), let object = json.objectValue else {
            throw TrustProblem("trust-root-format", "not JSON (a trust.json from fpctl trust init)")
        }
        guard object["format"]?.stringValue == format, object.count == 2 else {
            throw TrustProblem("trust-root-format", "format: must be \"\(format)\", beside roots")
        }
        let roots = try parseRoots(object["roots"], at: "roots")
        let first = roots[0]
        let own = first.signers(among: first.root.rootKeys)
        guard own.count >= first.root.threshold else {
            throw TrustProblem(
                "trust-root-threshold",
                "root version \(first.root.version) is signed by \(own.count) of its root keys, threshold \(first.root.threshold)"
            )
        }
        _ = try walk(from: first, through: roots.dropFirst(), anchorVersionOnly: false)
        return TrustFile(roots: roots)
    }

    /// Reads and checks `path`; a problem is one line naming the file.
    public static func load(_ path: String) throws -> TrustFile {
        let data = try InputFile.contents(path, "trust root", limit: maxFileBytes)
        do {
            return try parse(data)
        } catch {
            throw FPError.invalid([.error(error.rule, path, error.message)])
        }
    }

    /// The newest root reached from `anchor` through `chain` (TUF's "update the
    /// root"): versions newer than the anchor must follow it one by one, each
    /// signed by a threshold of the previous version's root keys and a threshold
    /// of its own, for the same app. Versions not newer than the anchor are passed
    /// over (a bundle carries the whole history; the app knows part of it), so a
    /// chain that stops short of the anchor leaves the anchor in force.
    public static func walk(
        from anchor: SignedRoot, through chain: some Sequence<SignedRoot>, anchorVersionOnly: Bool = true
    )
        throws(TrustProblem) -> SignedRoot
    {
        var current = anchor
        for next in chain where next.root.version > anchor.root.version || !anchorVersionOnly {
            let (old, new) = (current.root, next.root)
            guard new.version == old.version + 1 else {
                throw TrustProblem(
                    "trust-root-version",
                    "root version \(new.version) follows version \(old.version): each version must be the one before plus 1"
                )
            }
            guard new.appID.sameBytes(as: old.appID) else {
                throw TrustProblem(
                    "trust-root-format",
                    "root version \(new.version) is for app \(new.appID), version \(old.version) for \(old.appID)")
            }
            let bytes = new.signedBytes
            let byOld = next.signers(among: old.rootKeys, over: bytes)
            guard byOld.count >= old.threshold else {
                throw TrustProblem(
                    "trust-root-threshold",
                    "root version \(new.version) is signed by \(byOld.count) of version \(old.version)'s root keys, threshold \(old.threshold)"
                )
            }
            let byNew = next.signers(among: new.rootKeys, over: bytes)
            guard byNew.count >= new.threshold else {
                throw TrustProblem(
                    "trust-root-threshold",
                    "root version \(new.version) is signed by \(byNew.count) of its own root keys, threshold \(new.threshold)"
                )
            }
            current = next
        }
        return current
    }
}
