import Crypto
import Foundation

/// Ed25519 keys as fpctl writes and reads them (fpctl-bundle(5), "Keys"):
/// JSON files `{"alg":"ed25519","key_id":…,"private_key"|"public_key":…}`,
/// the private one mode 0600. A key's id is the first 16 hex digits of the
/// SHA-256 of its 32 raw public-key bytes; every command and finding that
/// names a key names it by that id.
public enum SigningKey {
    /// The largest key file read (`input-size` above it): a key file is about 150 bytes.
    public static let maxFileBytes = 1 << 16

    public struct Pair {
        public let keyID: String
        public let privateKey: Curve25519.Signing.PrivateKey
        public var publicKey: Curve25519.Signing.PublicKey { privateKey.publicKey }
    }

    /// The key id: the first 16 hex digits of the SHA-256 of the raw public key.
    public static func keyID(_ publicKey: Curve25519.Signing.PublicKey) -> String {
        keyID(raw: publicKey.rawRepresentation)
    }

    static func keyID(raw: Data) -> String { String(Digest.sha256Hex(raw).prefix(16)) }

    static func privateFile(_ key: Curve25519.Signing.PrivateKey) -> Data {
        CanonicalJSON.prettyData(
            .object([
                "alg": .string("ed25519"), "key_id": .string(keyID(key.publicKey)),
                "private_key": .string(key.rawRepresentation.base64EncodedString()),
            ]))
    }

    static func publicFile(_ key: Curve25519.Signing.PublicKey) -> Data {
        CanonicalJSON.prettyData(
            .object([
                "alg": .string("ed25519"), "key_id": .string(keyID(key)),
                "public_key": .string(key.rawRepresentation.base64EncodedString()),
            ]))
    }

    /// A private key file's bytes; `name` names it in the error. A `key_id`
    /// that is not the key's own is refused: it would name another key.
    public static func privateKey(_ data: Data, name: String) throws -> Pair {
        guard let json = try? JSONValue.parse(data), json["alg"]?.stringValue == "ed25519",
            let raw = json["private_key"]?.stringValue.flatMap({ Data(base64Encoded: $0) }),
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        else {
            throw FPError.invalid([.error("key-file", name, "not an fpctl ed25519 private key file")])
        }
        let id = keyID(key.publicKey)
        if let stated = json["key_id"]?.stringValue, stated != id {
            throw FPError.invalid([.error("key-file", name, "key_id \(stated) is not this key's id (\(id))")])
        }
        return Pair(keyID: id, privateKey: key)
    }

    /// A public key file's bytes; `name` names it in the error.
    public static func publicKey(_ data: Data, name: String) throws -> Curve25519.Signing.PublicKey {
        guard let json = try? JSONValue.parse(data), json["alg"]?.stringValue == "ed25519",
            let raw = json["public_key"]?.stringValue.flatMap({ Data(base64Encoded: $0) }),
            let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw)
        else {
            throw FPError.invalid([.error("key-file", name, "not an fpctl ed25519 public key file")])
        }
        if let stated = json["key_id"]?.stringValue, !stated.sameBytes(as: keyID(key)) {
            throw FPError.invalid([.error("key-file", name, "key_id \(stated) is not this key's id (\(keyID(key)))")])
        }
        return key
    }

    /// Reads a private key from where `spec` says: `env:NAME` (the key file's
    /// contents in an environment variable), `fd:N` (read from an open file
    /// descriptor, as a CI system passes a secret), or a path. A file that
    /// its group or others may read is refused, as ssh refuses one.
    public static func loadPrivate(_ spec: String) throws -> Pair {
        let (data, name) = try secret(spec)
        return try privateKey(data, name: name)
    }

    public static func loadPublic(_ path: String) throws -> Curve25519.Signing.PublicKey {
        try publicKey(try InputFile.contents(path, "public key file"), path: path)
    }

    static func publicKey(_ data: Data, path: String) throws -> Curve25519.Signing.PublicKey {
        try publicKey(data, name: path)
    }

    /// The bytes of a secret named by `env:NAME`, `fd:N` or a path, and the
    /// name errors give it (never its contents).
    static func secret(_ spec: String) throws -> (Data, String) {
        if spec.hasPrefix("env:") {
            let variable = String(spec.dropFirst(4))
            guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
                throw FPError.inputMissing("\(spec): the environment variable \(variable) is not set")
            }
            return (Data(value.utf8), spec)
        }
        let handle: FileHandle
        if spec.hasPrefix("fd:") {
            guard let fd = Int32(spec.dropFirst(3)), fd >= 0 else {
                throw FPError.usage("\(spec): give a file descriptor number, e.g. fd:3")
            }
            handle = FileHandle(fileDescriptor: fd, closeOnDealloc: false)
        } else {
            // The mode of the file opened, not of whatever the name pointed at a moment before.
            handle = try InputFile.handle(spec, "key file", kind: .stream)
            var info = stat()
            if fstat(handle.fileDescriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 {
                let mode = String(info.st_mode & 0o777, radix: 8)
                throw FPError.invalid([
                    .error(
                        "key-permissions", spec,
                        "the private key is readable by others (mode \(mode)); chmod 600 \(spec)")
                ])
            }
        }
        let limit = maxFileBytes
        let data: Data
        do { data = try handle.read(upToCount: limit + 1) ?? Data() } catch {
            throw InputFile.readFailure(spec, "key", error)
        }
        guard data.count <= limit else {
            throw FPError.invalid([.error("input-size", spec, "the key is larger than \(limit) bytes")])
        }
        return (data, spec)
    }

    /// Writes `<base>.key` (0600) and `<base>.pub`; refuses to replace either.
    /// Returns the key id.
    public static func generate(base: String) throws -> String {
        let key = Curve25519.Signing.PrivateKey()
        // The base names files, not a directory (`-o keys/` wrote a hidden `keys/.key`).
        let name = PathName.lastComponent(of: base)
        guard !base.hasSuffix("/"), !name.isEmpty, name != ".", name != ".." else {
            throw FPError.usage("\(base): give the key files' name, e.g. keys/release for keys/release.key and .pub")
        }
        let files = [
            ("\(base).key", privateFile(key), mode_t(0o600)), ("\(base).pub", publicFile(key.publicKey), mode_t(0o644)),
        ]
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
        return keyID(key.publicKey)
    }
}
