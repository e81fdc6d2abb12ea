import Crypto
import Foundation

/// Ed25519 signing of a bundle's manifest (README, "Bundled defaults in CI"): `manifest.sig` holds
/// `{"alg":"ed25519","key_id":…,"signature":…}` over the exact bytes of
/// `manifest.json`. Key files are JSON; the private key file is mode 0600.
public enum BundleSigning {
    public struct KeyPair {
        public let keyID: String
        public let privateKey: Curve25519.Signing.PrivateKey
    }

    /// The key id: the first 16 hex digits of the SHA-256 of the raw public key.
    public static func keyID(_ publicKey: Curve25519.Signing.PublicKey) -> String {
        String(Digest.sha256Hex(publicKey.rawRepresentation).prefix(16))
    }

    /// Writes `<base>.key` (0600) and `<base>.pub`; refuses to replace either.
    public static func generate(base: String) throws -> String {
        let key = Curve25519.Signing.PrivateKey()
        let id = keyID(key.publicKey)
        let priv = CanonicalJSON.prettyData(
            .object([
                "alg": .string("ed25519"), "key_id": .string(id),
                "private_key": .string(key.rawRepresentation.base64EncodedString()),
            ]))
        let pub = CanonicalJSON.prettyData(
            .object([
                "alg": .string("ed25519"), "key_id": .string(id),
                "public_key": .string(key.publicKey.rawRepresentation.base64EncodedString()),
            ]))
        // The base names files, not a directory (`-o keys/` wrote a hidden `keys/.key`).
        let name = PathName.lastComponent(of: base)
        guard !base.hasSuffix("/"), !name.isEmpty, name != ".", name != ".." else {
            throw FPError.usage("\(base): give the key files' name, e.g. keys/release for keys/release.key and .pub")
        }
        let files = [("\(base).key", priv, mode_t(0o600)), ("\(base).pub", pub, mode_t(0o644))]
        // Both names are checked before either is written: keygen never replaces
        // a key (so no hint to overwrite one), and never leaves half a pair.
        for (path, _, _) in files {
            var info = stat()
            if lstat(path, &info) == 0 { throw FPError.cannotWrite("\(path): already exists") }
        }
        // Both temporary files are written before either is published; the
        // pair is published key first, and a public key that cannot be
        // published takes its private key back with it.
        let outputs = try files.map { path, data, mode in
            let out = try AtomicFile.Output(destination: path, overwrite: false, mode: mode)
            try out.write(data)
            return out
        }
        try outputs[0].commit()
        do {
            try outputs[1].commit()
        } catch {
            unlink(files[0].0)
            throw error
        }
        return id
    }

    public static func loadPrivate(_ path: String) throws -> KeyPair {
        try privateKey(try InputFile.contents(path, "key file"), path: path)
    }

    /// A private key file's bytes; `path` names it in the error.
    static func privateKey(_ data: Data, path: String) throws -> KeyPair {
        guard let json = try? JSONValue.parse(data), json["alg"]?.stringValue == "ed25519",
            let raw = json["private_key"]?.stringValue.flatMap({ Data(base64Encoded: $0) }),
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        else {
            throw FPError.invalid([.error("key-file", path, "not an fpctl ed25519 private key file")])
        }
        return KeyPair(keyID: keyID(key.publicKey), privateKey: key)
    }

    public static func loadPublic(_ path: String) throws -> Curve25519.Signing.PublicKey {
        try publicKey(try InputFile.contents(path, "public key file"), path: path)
    }

    /// A public key file's bytes; `path` names it in the error.
    static func publicKey(_ data: Data, path: String) throws -> Curve25519.Signing.PublicKey {
        guard let json = try? JSONValue.parse(data), json["alg"]?.stringValue == "ed25519",
            let raw = json["public_key"]?.stringValue.flatMap({ Data(base64Encoded: $0) }),
            let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw)
        else {
            throw FPError.invalid([.error("key-file", path, "not an fpctl ed25519 public key file")])
        }
        return key
    }

    /// Checks `manifest.sig` against the manifest bytes and a trusted key.
    static func verify(signature sigData: Data?, manifest: Data, publicKey: Curve25519.Signing.PublicKey) -> Finding? {
        guard let sigData else {
            return .error("signature-missing", BundleManifest.signaturePath, "the bundle is not signed")
        }
        guard let json = try? JSONValue.parse(sigData), json["alg"]?.stringValue == "ed25519",
            let id = json["key_id"]?.stringValue,
            let sig = json["signature"]?.stringValue.flatMap({ Data(base64Encoded: $0) })
        else {
            return .error("signature-invalid", BundleManifest.signaturePath, "not an ed25519 signature record")
        }
        guard id == keyID(publicKey) else {
            return .error(
                "signature-unknown-key", BundleManifest.signaturePath,
                "signed with key \(id), not the trusted key \(keyID(publicKey))")
        }
        guard publicKey.isValidSignature(sig, for: manifest) else {
            return .error(
                "signature-invalid", BundleManifest.signaturePath, "the signature does not match manifest.json")
        }
        return nil
    }

    /// Re-writes a valid bundle with `manifest.sig` as its second entry, every
    /// other entry and header as before, so it stays canonical; replaces the file
    /// atomically (or writes `output`, replacing a file there only with `overwrite`).
    public static func sign(_ bundle: String, key: KeyPair, output: String? = nil, overwrite: Bool = false) throws
        -> String
    {
        let report = try BundleValidator.validate(bundle)
        guard report.isValid, let manifest = report.manifest, let digest = report.digest else {
            throw FPError.invalid(report.findings)
        }
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
                    let signature = try key.privateKey.signature(for: manifestData)
                    let sig = CanonicalJSON.prettyData(
                        .object([
                            "alg": .string("ed25519"), "key_id": .string(key.keyID),
                            "signature": .string(signature.base64EncodedString()),
                        ]))
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
