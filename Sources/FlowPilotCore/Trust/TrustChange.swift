import Crypto
import Foundation

/// The changes `fpctl trust` makes (fpctl-trust(1)). Each makes version N+1
/// of the root, signed by a threshold of version N's root keys and a threshold
/// of its own; the file keeps every version, so a bundle can carry the chain.
public enum TrustChange {
    /// Version 1: `rootKeys` are its root keys, and sign it.
    public static func initial(appID: String, rootKeys: [SigningKey.Pair], threshold: Int, expires: Date)
        throws -> TrustFile
    {
        guard !appID.isEmpty else { throw FPError.usage("--app-id: give the app's id, as its bundles' app_id") }
        let keys = try distinct(rootKeys, "--root-key")
        guard (1...keys.count).contains(threshold) else {
            throw FPError.usage("--threshold \(threshold): use 1 to \(keys.count), the number of root keys given")
        }
        let root = TrustRoot(
            appID: appID, version: 1, expires: expires, minSequence: 0, threshold: threshold,
            rootKeys: Dictionary(uniqueKeysWithValues: keys.map { ($0.keyID, $0.publicKey.rawRepresentation) }),
            signingKeys: [:], revoked: [])
        return TrustFile(roots: [try SignedRoot(root: root, signedBy: keys)])
    }

    /// What a change may also set: the new version's expiry and its lowest accepted sequence.
    public struct Common: Sendable {
        public var expires: Date
        public var minSequence: Int?
        public init(expires: Date, minSequence: Int? = nil) {
            (self.expires, self.minSequence) = (expires, minSequence)
        }
    }

    /// Version N+1 of `file`: `change` applied to version N, signed by
    /// `signers` (root keys of version N, of N+1, or both).
    public static func next(
        _ file: TrustFile, signers: [SigningKey.Pair], common: Common, change: (inout TrustRoot) throws -> Void
    ) throws -> TrustFile {
        let old = file.current
        var new = old
        new.version = old.version + 1
        new.expires = common.expires
        if let minimum = common.minSequence {
            if let reason = TrustRoot.outOfRange("--min-sequence", minimum, lowest: 0) { throw FPError.usage(reason) }
            guard minimum >= old.minSequence else {
                throw FPError.usage(
                    "--min-sequence \(minimum): below version \(old.version)'s \(old.minSequence); it never goes down (that would let old bundles back)"
                )
            }
            new.minSequence = minimum
        }
        try change(&new)
        // A key given as both an old and a new root key signs once.
        var seen = Set<String>()
        let keys = signers.filter { seen.insert($0.keyID).inserted }
        for key in keys where old.rootKeys[key.keyID] == nil && new.rootKeys[key.keyID] == nil {
            throw FPError.usage("key \(key.keyID) is not a root key of version \(old.version) or \(new.version)")
        }
        let signed = try SignedRoot(root: new, signedBy: keys)
        for (root, which) in [(old, "version \(old.version)'s"), (new, "version \(new.version)'s own")] {
            let count = signed.signers(among: root.rootKeys).count
            guard count >= root.threshold else {
                throw FPError.usage(
                    "\(count) of \(which) root keys given, threshold \(root.threshold): give more of them with --root-key"
                )
            }
        }
        var file = file
        file.roots.append(signed)
        return file
    }

    /// Delegates bundle signing to `publicKey` from `notBefore` to `expires`.
    public static func delegate(
        _ root: inout TrustRoot, publicKey: Curve25519.Signing.PublicKey, notBefore: Date, expires: Date
    )
        throws
    {
        let id = SigningKey.keyID(publicKey)
        guard !root.revoked.contains(id) else {
            throw FPError.usage("key \(id) is revoked: a revoked key stays revoked; make a new one with bundle keygen")
        }
        guard root.rootKeys[id] == nil else {
            throw FPError.usage("key \(id) is a root key: keep root keys for the root, and delegate a key of its own")
        }
        guard expires > notBefore else { throw FPError.usage("--expires: the delegation must end after it starts") }
        root.signingKeys[id] = TrustRoot.Delegation(
            publicKey: publicKey.rawRepresentation, notBefore: notBefore, expires: expires)
    }

    /// Revokes a signing key: it is no longer delegated, and a bundle it signs
    /// is refused as revoked by every root from this version on.
    public static func revoke(_ root: inout TrustRoot, keyID: String) throws {
        guard TrustRoot.isKeyID(keyID) else { throw FPError.usage("--key-id \(keyID): a key id is 16 hex digits") }
        guard root.rootKeys[keyID] == nil else {
            throw FPError.usage("key \(keyID) is a root key: replace it with trust rotate")
        }
        guard root.signingKeys[keyID] != nil || root.revoked.contains(keyID) else {
            throw FPError.usage("key \(keyID) is not delegated in version \(root.version - 1): nothing to revoke")
        }
        root.signingKeys[keyID] = nil
        root.revoked.insert(keyID)
    }

    /// Replaces the root keys with `newKeys` and the threshold with `threshold`.
    public static func rotate(_ root: inout TrustRoot, newKeys: [SigningKey.Pair], threshold: Int) throws {
        let keys = try distinct(newKeys, "--new-root-key")
        guard (1...keys.count).contains(threshold) else {
            throw FPError.usage("--threshold \(threshold): use 1 to \(keys.count), the number of new root keys")
        }
        for key in keys where root.signingKeys[key.keyID] != nil || root.revoked.contains(key.keyID) {
            throw FPError.usage("key \(key.keyID) is a signing key: a root key must be a key of its own")
        }
        root.rootKeys = Dictionary(uniqueKeysWithValues: keys.map { ($0.keyID, $0.publicKey.rawRepresentation) })
        root.threshold = threshold
    }

    private static func distinct(_ keys: [SigningKey.Pair], _ flag: String) throws -> [SigningKey.Pair] {
        guard !keys.isEmpty else { throw FPError.usage("give at least one \(flag)") }
        var seen = Set<String>()
        for key in keys where !seen.insert(key.keyID).inserted {
            throw FPError.usage("\(flag): key \(key.keyID) is given twice; it counts once toward a threshold")
        }
        return keys
    }
}
