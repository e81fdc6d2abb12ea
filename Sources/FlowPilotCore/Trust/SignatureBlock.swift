import Crypto
import Foundation

/// `manifest.sig` (fpctl-bundle(5), "Signatures"), in either of its forms:
///
/// - the single-key form, `{"alg":"ed25519","key_id":…,"signature":…}`: an
///   Ed25519 signature over the exact bytes of `manifest.json`;
/// - the trust-root form, `{"format_version":2,"signed":{…},"signature":…,"roots":[…]}`:
///   a statement naming the manifest by its SHA-256 with the app id, a sequence
///   number, the signing time and an expiry, signed (over its canonical JSON) by
///   a key a trust root delegates to, and the root versions that delegation
///   is in, oldest first.
public enum SignatureBlock {
    public static let statementType = "fpctl-bundle-signature"

    /// How far ahead of the validator's clock a statement's `signed_at` may
    /// be (a signing machine's clock that runs ahead, as Kerberos allows 5
    /// minutes): beyond it, `signature-future`; `bundle sign` refuses to
    /// write one (64).
    public static let clockSkew: TimeInterval = 300

    /// What the trust-root form's key signs.
    public struct Statement: Sendable, Equatable {
        public var appID: String
        public var manifestSHA256: String
        public var sequence: Int
        public var signedAt: Date
        public var expires: Date
        public var keyID: String

        var json: JSONValue {
            .object([
                "type": .string(SignatureBlock.statementType), "app_id": .string(appID),
                "manifest_sha256": .string(manifestSHA256), "sequence": .integer(Int64(sequence)),
                "signed_at": .string(RFC3339.string(signedAt)), "expires": .string(RFC3339.string(expires)),
                "key_id": .string(keyID),
            ])
        }

        public var signedBytes: Data { CanonicalJSON.data(json) }
    }

    /// What `validate` read and which key made it, for its report and `inspect`.
    public struct Summary: Sendable, Equatable, Encodable {
        public enum Form: String, Sendable, Encodable {
            case singleKey = "single_key"
            case trustRoot = "trust_root"
        }

        public let form: Form
        public let keyID: String
        /// The trust-root form's fields; nil in the single-key form.
        public let appID: String?
        public let sequence: Int?
        public let signedAt: String?
        public let expires: String?
        /// The newest root version the bundle carries (trust-root form), or
        /// that validation reached from the app's copy (`--trust`).
        public let rootVersion: Int?

        /// The single-key form's: a key id and nothing else.
        init(singleKey keyID: String) {
            (form, self.keyID, appID, sequence, signedAt, expires, rootVersion) = (
                .singleKey, keyID, nil, nil, nil, nil, nil
            )
        }

        /// The trust-root form's: the statement's fields, and the root version reached or carried.
        init(_ statement: Statement, rootVersion: Int?) {
            (form, keyID, appID, sequence) = (.trustRoot, statement.keyID, statement.appID, statement.sequence)
            (signedAt, expires) = (RFC3339.string(statement.signedAt), RFC3339.string(statement.expires))
            self.rootVersion = rootVersion
        }

        enum CodingKeys: String, CodingKey {
            case form, sequence, expires
            case keyID = "key_id"
            case appID = "app_id"
            case signedAt = "signed_at"
            case rootVersion = "root_version"
        }
    }

    enum Parsed {
        case singleKey(keyID: String, signature: Data)
        case trustRoot(statement: Statement, signature: Data, roots: [SignedRoot])
    }

    static let path = "manifest.sig"

    // MARK: Writing

    /// The single-key form's bytes.
    public static func singleKey(manifest: Data, key: SigningKey.Pair) throws -> Data {
        let signature = try key.privateKey.signature(for: manifest)
        return CanonicalJSON.prettyData(
            .object([
                "alg": .string("ed25519"), "key_id": .string(key.keyID),
                "signature": .string(signature.base64EncodedString()),
            ]))
    }

    /// The trust-root form's bytes for `statement`, carrying `roots`.
    public static func trustRoot(statement: Statement, key: SigningKey.Pair, roots: [SignedRoot]) throws -> Data {
        let signature = try key.privateKey.signature(for: statement.signedBytes)
        return CanonicalJSON.prettyData(
            .object([
                "format_version": .integer(2), "signed": statement.json,
                "signature": .string(signature.base64EncodedString()), "roots": .array(roots.map(\.json)),
            ]))
    }

    // MARK: Reading

    static func parse(_ data: Data) throws(TrustProblem) -> Parsed {
        guard let json = try? JSONValue.parse(data), let object = json.objectValue else {
            throw TrustProblem("signature-invalid", "not a signature record (JSON)")
        }
        if object["format_version"] == nil {
            guard object["alg"]?.stringValue == "ed25519", let id = object["key_id"]?.stringValue,
                let sig = object["signature"]?.stringValue.flatMap({ Data(base64Encoded: $0) })
            else { throw TrustProblem("signature-invalid", "not an ed25519 signature record") }
            return .singleKey(keyID: id, signature: sig)
        }
        guard object["format_version"]?.integerValue == 2, object.count == 4 else {
            throw TrustProblem(
                "signature-invalid", "format_version: 2 with signed, signature and roots (a newer fpctl's record?)")
        }
        guard let sig = object["signature"]?.stringValue.flatMap({ Data(base64Encoded: $0) }) else {
            throw TrustProblem("signature-invalid", "signature: the base64 of an Ed25519 signature")
        }
        let statement = try parseStatement(object["signed"])
        let roots = try TrustFile.parseRoots(object["roots"], at: "roots")
        return .trustRoot(statement: statement, signature: sig, roots: roots)
    }

    static func parseStatement(_ value: JSONValue?) throws(TrustProblem) -> Statement {
        func bad(_ field: String, _ what: String) -> TrustProblem {
            TrustProblem("signature-invalid", "signed.\(field): \(what)")
        }
        guard let o = value?.objectValue, o.count == 7 else {
            throw bad("", "an object of type, app_id, manifest_sha256, sequence, signed_at, expires and key_id")
        }
        guard o["type"]?.stringValue == statementType else { throw bad("type", "must be \"\(statementType)\"") }
        guard let app = o["app_id"]?.stringValue else { throw bad("app_id", "a string") }
        guard let sha = o["manifest_sha256"]?.stringValue, sha.utf8.count == 64 else {
            throw bad("manifest_sha256", "64 hex digits")
        }
        guard let id = o["key_id"]?.stringValue, TrustRoot.isKeyID(id) else {
            throw bad("key_id", "16 lower-case hex digits")
        }
        let statement = Statement(
            appID: app, manifestSHA256: sha,
            sequence: try TrustRoot.whole(
                o["sequence"], 0, bad("sequence", "a whole number from 0 to 2^53 - 1, in digits")),
            signedAt: try TrustRoot.time(o["signed_at"], bad("signed_at", "an RFC 3339 time")),
            expires: try TrustRoot.time(o["expires"], bad("expires", "an RFC 3339 time")), keyID: id)
        // A statement that is never valid is not a statement (fpctl-bundle(5)).
        guard statement.expires > statement.signedAt else { throw bad("expires", "after signed_at") }
        return statement
    }

    /// What a trust-root check needs: the root the app embeds (the newest
    /// version of its copy), the lowest sequence it takes beside the root's
    /// own, and the time to check expiries against.
    public struct Policy: Sendable {
        public var anchor: SignedRoot
        public var minSequence: Int
        public var now: Date
        public init(anchor: SignedRoot, minSequence: Int = 0, now: Date) {
            (self.anchor, self.minSequence, self.now) = (anchor, minSequence, now)
        }
    }

    /// Checks `manifest.sig` (nil: missing) against the manifest's bytes with
    /// a trust root: the findings (every one that applies once the key is
    /// known to be trusted) and what was read.
    public static func verify(signature data: Data?, manifest: Data, manifestAppID: String?, policy: Policy)
        -> (findings: [Finding], summary: Summary?)
    {
        func finding(_ p: TrustProblem) -> Finding { .error(p.rule, path, p.message) }
        guard let data else { return ([.error("signature-missing", path, "the bundle is not signed")], nil) }
        let parsed: Parsed
        do { parsed = try parse(data) } catch { return ([finding(error)], nil) }
        let (statement, signature, carried): (Statement, Data, [SignedRoot])
        switch parsed {
        case .singleKey(let id, _):
            let problem =
                "signed in the single-key form by key \(id): no app id, sequence or expiry to check; sign it with --trust"
            return ([.error("signature-form", path, problem)], Summary(singleKey: id))
        case .trustRoot(let s, let sig, let roots):
            (statement, signature, carried) = (s, sig, roots)
        }
        let root: TrustRoot
        do {
            root = try TrustFile.walk(from: policy.anchor, through: carried).root
        } catch { return ([finding(error)], nil) }
        let summary = Summary(statement, rootVersion: root.version)
        let id = statement.keyID
        if root.revoked.contains(id) {
            return (
                [.error("signature-key-revoked", path, "signed by key \(id), revoked in root version \(root.version)")],
                summary
            )
        }
        guard let delegation = root.signingKeys[id] else {
            return (
                [
                    .error(
                        "signature-unknown-key", path,
                        "signed by key \(id), which root version \(root.version) does not delegate to")
                ],
                summary
            )
        }
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: delegation.publicKey),
            key.isValidSignature(signature, for: statement.signedBytes)
        else {
            return (
                [.error("signature-invalid", path, "the signature by key \(id) does not match its signed statement")],
                summary
            )
        }
        var findings: [Finding] = []
        let digest = Digest.sha256Hex(manifest)
        if statement.manifestSHA256 != digest {
            findings.append(
                .error(
                    "signature-invalid", path,
                    "signed manifest sha256 \(statement.manifestSHA256), but manifest.json is \(digest): changed after signing"
                ))
        }
        if root.expires < policy.now {
            findings.append(
                .error(
                    "trust-root-expired", path,
                    "root version \(root.version) expired at \(RFC3339.string(root.expires))"))
        }
        if delegation.expires < policy.now || delegation.notBefore > policy.now
            || statement.signedAt > delegation.expires
        {
            findings.append(
                .error(
                    "signature-key-expired", path,
                    "key \(id) is delegated from \(RFC3339.string(delegation.notBefore)) to \(RFC3339.string(delegation.expires)); "
                        + "signed at \(RFC3339.string(statement.signedAt)), checked at \(RFC3339.string(policy.now))"))
        }
        for (what, app) in [
            ("the signed statement", statement.appID), ("manifest.json", manifestAppID ?? statement.appID),
        ]
        where !app.sameBytes(as: root.appID) {
            findings.append(
                .error("signature-wrong-app", path, "\(what) is for app \(app), the trust root for app \(root.appID)"))
        }
        if statement.expires < policy.now {
            findings.append(
                .error("signature-expired", path, "the signature expired at \(RFC3339.string(statement.expires))"))
        }
        if statement.signedAt > policy.now.addingTimeInterval(clockSkew) {
            findings.append(
                .error(
                    "signature-future", path,
                    "signed at \(RFC3339.string(statement.signedAt)), more than \(Int(clockSkew)) s after now (\(RFC3339.string(policy.now)))"
                ))
        }
        let minimum = max(root.minSequence, policy.minSequence)
        if statement.sequence < minimum {
            findings.append(
                .error(
                    "signature-rollback", path,
                    "sequence \(statement.sequence) is below the lowest accepted, \(minimum) "
                        + (policy.minSequence > root.minSequence
                            ? "(--min-sequence)" : "(root version \(root.version))")))
        }
        return (findings, summary)
    }

    /// Checks `manifest.sig` against one trusted key (`validate --public-key`):
    /// the single-key form's signature over the manifest, or the trust-root
    /// form's over its statement (whose manifest digest must match); nothing of
    /// a trust root is checked.
    public static func verify(signature data: Data?, manifest: Data, publicKey: Curve25519.Signing.PublicKey)
        -> (findings: [Finding], summary: Summary?)
    {
        guard let data else { return ([.error("signature-missing", path, "the bundle is not signed")], nil) }
        let parsed: Parsed
        do { parsed = try parse(data) } catch { return ([.error(error.rule, path, error.message)], nil) }
        let trusted = SigningKey.keyID(publicKey)
        switch parsed {
        case .singleKey(let id, let signature):
            let summary = Summary(singleKey: id)
            guard id.sameBytes(as: trusted) else {
                return (
                    [.error("signature-unknown-key", path, "signed with key \(id), not the trusted key \(trusted)")],
                    summary
                )
            }
            guard publicKey.isValidSignature(signature, for: manifest) else {
                return ([.error("signature-invalid", path, "the signature does not match manifest.json")], summary)
            }
            return ([], summary)
        case .trustRoot(let statement, let signature, let roots):
            let summary = Summary(statement, rootVersion: roots.last?.root.version)
            guard statement.keyID.sameBytes(as: trusted) else {
                return (
                    [
                        .error(
                            "signature-unknown-key", path,
                            "signed with key \(statement.keyID), not the trusted key \(trusted)")
                    ],
                    summary
                )
            }
            guard publicKey.isValidSignature(signature, for: statement.signedBytes),
                statement.manifestSHA256 == Digest.sha256Hex(manifest)
            else {
                return ([.error("signature-invalid", path, "the signature does not match manifest.json")], summary)
            }
            return ([], summary)
        }
    }

    /// What `inspect` shows of a block, checked against nothing.
    public static func summary(of data: Data) -> Summary? {
        switch try? parse(data) {
        case .singleKey(let id, _):
            return Summary(singleKey: id)
        case .trustRoot(let s, _, let roots):
            return Summary(s, rootVersion: roots.last?.root.version)
        case nil:
            return nil
        }
    }
}
