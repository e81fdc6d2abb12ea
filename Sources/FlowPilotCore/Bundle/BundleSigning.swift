import Crypto
import Foundation

/// Signing of a bundle's manifest (fpctl-bundle(5), "Signatures"): `manifest.sig`,
/// the second entry, in the single-key form (an Ed25519 signature over the
/// exact bytes of `manifest.json`) or the trust-root form (`SignatureBlock`).
/// Keys are `SigningKey`'s.
public enum BundleSigning {
    public typealias KeyPair = SigningKey.Pair

    /// How a bundle is signed.
    public enum Signer {
        /// The single-key form, checked with `validate --public-key`.
        case singleKey(SigningKey.Pair)
        /// The trust-root form.
        case trustRoot(TrustSigning)
    }

    /// The trust-root form's inputs: `key` must be delegated by `trust`'s
    /// newest version now, and not have expired at `signedAt`; `sequence` at
    /// least the root's min_sequence.
    public struct TrustSigning {
        public var key: SigningKey.Pair
        public var trust: TrustFile
        public var sequence: Int
        public var signedAt: Date
        public var expires: Date
        public var now: Date
        public init(key: SigningKey.Pair, trust: TrustFile, sequence: Int, signedAt: Date, expires: Date, now: Date) {
            (self.key, self.trust, self.sequence) = (key, trust, sequence)
            (self.signedAt, self.expires, self.now) = (signedAt, expires, now)
        }
    }

    public static func keyID(_ publicKey: Curve25519.Signing.PublicKey) -> String { SigningKey.keyID(publicKey) }

    public static func generate(base: String) throws -> String { try SigningKey.generate(base: base) }

    public static func loadPrivate(_ spec: String) throws -> KeyPair { try SigningKey.loadPrivate(spec) }

    static func privateKey(_ data: Data, path: String) throws -> KeyPair { try SigningKey.privateKey(data, name: path) }

    public static func loadPublic(_ path: String) throws -> Curve25519.Signing.PublicKey {
        try SigningKey.loadPublic(path)
    }

    static func publicKey(_ data: Data, path: String) throws -> Curve25519.Signing.PublicKey {
        try SigningKey.publicKey(data, name: path)
    }

    /// Checks `manifest.sig` against the manifest bytes and a trusted key.
    static func verify(signature sigData: Data?, manifest: Data, publicKey: Curve25519.Signing.PublicKey) -> Finding? {
        SignatureBlock.verify(signature: sigData, manifest: manifest, publicKey: publicKey).findings.first
    }

    /// Why `signer` may not sign a bundle for `appID` (nil: it may): the
    /// trust root's newest version has expired; the key is revoked, not
    /// delegated, outside its window now, or its delegation ended before
    /// `signedAt`; the root is for another app; the sequence is below the
    /// root's min_sequence; the signature would be expired now (a
    /// `signedAt` far back). What validate would refuse, refused before
    /// anything is written.
    static func refusal(_ signer: Signer, appID: String) -> String? {
        guard case .trustRoot(let t) = signer else { return nil }
        if let reason = TrustRoot.outOfRange("--sequence", t.sequence, lowest: 0) { return reason }
        let root = t.trust.current
        let id = t.key.keyID
        if root.expires < t.now {
            return
                "root version \(root.version) expired at \(RFC3339.string(root.expires)); make a new version (any fpctl trust change)"
        }
        if root.revoked.contains(id) { return "key \(id) is revoked in root version \(root.version)" }
        guard let delegation = root.signingKeys[id] else {
            return "key \(id) is not delegated in root version \(root.version) (fpctl trust delegate)"
        }
        let window = "\(RFC3339.string(delegation.notBefore)) to \(RFC3339.string(delegation.expires))"
        if t.now < delegation.notBefore || t.now > delegation.expires {
            return "key \(id) is delegated from \(window), not now (\(RFC3339.string(t.now)))"
        }
        if t.signedAt > delegation.expires {
            return "key \(id) is delegated from \(window), not at the signing time \(RFC3339.string(t.signedAt))"
        }
        // By bytes: "café" precomposed and decomposed are two apps (#64).
        if !root.appID.sameBytes(as: appID) {
            return "the trust root is for app \(root.appID), the bundle for \(appID)"
        }
        if t.sequence < root.minSequence {
            return "--sequence \(t.sequence) is below root version \(root.version)'s min_sequence \(root.minSequence)"
        }
        if t.expires <= t.signedAt { return "--expires: the signature must expire after it is made" }
        if t.signedAt > t.now.addingTimeInterval(SignatureBlock.clockSkew) {
            // What validate calls signature-future: a SOURCE_DATE_EPOCH ahead of the clock.
            return
                "the signing time \(RFC3339.string(t.signedAt)) (SOURCE_DATE_EPOCH) is more than \(Int(SignatureBlock.clockSkew)) s after now (\(RFC3339.string(t.now)))"
        }
        if t.expires < t.now {
            // signed_at from SOURCE_DATE_EPOCH can lie far back: what validate would call expired is not written.
            return
                "the signature would expire at \(RFC3339.string(t.expires)), before now (\(RFC3339.string(t.now))): "
                + "signed at \(RFC3339.string(t.signedAt)) (SOURCE_DATE_EPOCH), give a later one or a longer --expires"
        }
        return nil
    }

    /// manifest.json's bytes: the first entry, as validation found it.
    static func firstEntry(of bundle: String) throws -> Data {
        do {
            let reader = try ZipReader(path: bundle)
            var data = Data()
            guard let entry = try reader.next(), entry.path == BundleManifest.path else {
                throw FPError.failed("\(bundle): manifest.json is not the first entry")
            }
            try reader.readData {
                data.append(contentsOf: $0)
                return true
            }
            return data
        } catch let error as ArchiveError {
            throw FPError.failed("\(bundle): \(error.message)")
        }
    }

    static func block(_ signer: Signer, manifest: Data, appID: String) throws -> Data {
        switch signer {
        case .singleKey(let key):
            return try SignatureBlock.singleKey(manifest: manifest, key: key)
        case .trustRoot(let t):
            let statement = SignatureBlock.Statement(
                appID: appID, manifestSHA256: Digest.sha256Hex(manifest), sequence: t.sequence, signedAt: t.signedAt,
                expires: t.expires, keyID: t.key.keyID)
            return try SignatureBlock.trustRoot(statement: statement, key: t.key, roots: t.trust.roots)
        }
    }

    /// Re-writes a valid bundle with `manifest.sig` as its second entry, every
    /// other entry and header as before, so it stays canonical; replaces the file
    /// atomically (or writes `output`, replacing a file there only with `overwrite`).
    public static func sign(_ bundle: String, key: KeyPair, output: String? = nil, overwrite: Bool = false) throws
        -> String
    {
        try sign(bundle, signer: .singleKey(key), output: output, overwrite: overwrite)
    }

    /// `sign` with either form. What `refusal` finds is refused (a usage
    /// error) before anything is written.
    public static func sign(_ bundle: String, signer: Signer, output: String? = nil, overwrite: Bool = false) throws
        -> String
    {
        try sign(bundle, output: output, overwrite: overwrite) { manifest, appID in
            if let refusal = refusal(signer, appID: appID) { throw FPError.usage(refusal) }
            return try block(signer, manifest: manifest, appID: appID)
        }
    }

    /// Writes `manifest.sig` as `makeBlock` makes it from the manifest's bytes
    /// and app id: the tests' way to make the blocks validate must refuse.
    static func sign(
        _ bundle: String, output: String?, overwrite: Bool, makeBlock: (Data, String) throws -> Data
    ) throws -> String {
        let report = try BundleValidator.validate(bundle)
        guard report.isValid, let manifest = report.manifest, let digest = report.digest else {
            throw FPError.invalid(report.findings)
        }
        // The refusals come before the output is opened: nothing is written.
        let manifestBytes = try firstEntry(of: bundle)
        let sig = try makeBlock(manifestBytes, manifest.appID)
        let sizes = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.path, $0.size) })
        let out = try AtomicFile.Output(destination: output ?? bundle, overwrite: output == nil || overwrite)
        do {
            // One entry at a time from the old archive into the new one: the manifest
            // (small, needed whole to sign), the new signature, then the rest as they come.
            let reader = try ZipReader(path: bundle)
            let writer = try ZipWriter(output: out, modified: manifest.createdAt)
            while let entry = try reader.next() {
                if entry.path == BundleManifest.signaturePath { continue }
                if entry.path == BundleManifest.path {
                    var manifestData = Data()
                    try reader.readData {
                        manifestData.append(contentsOf: $0)
                        return true
                    }
                    guard manifestData == manifestBytes else {
                        throw FPError.failed("\(bundle): manifest.json changed while it was signed")
                    }
                    for (path, data) in [(BundleManifest.path, manifestData), (BundleManifest.signaturePath, sig)] {
                        try writer.addFile(path: path, size: Int64(data.count), store: false) { sink in
                            try data.withUnsafeBytes { try sink($0) }
                        }
                    }
                    continue
                }
                try writer.addFile(
                    path: entry.path, size: sizes[entry.path] ?? 0,
                    store: BundlePath.isStored(entry.path)
                ) { sink in
                    try reader.readData { chunk in
                        try sink(chunk)
                        return true
                    }
                }
            }
            try writer.close()
        } catch let error as ArchiveError {
            throw FPError.cannotWrite("\(output ?? bundle): \(error.message)")
        }
        try out.commit()
        return digest
    }
}
