import Crypto
import Foundation
import FuzzSupport

@testable import FlowPilotCore

// Key, signature and trust files: reading either kind of key file, a
// trust.json, and checking a signature record (either form) against a manifest
// never crashes; a key that loads has a 16-digit key id; a trust.json that
// parses writes back to bytes that parse to the same roots, its numbers as
// their digits; a random record
// never verifies, by one key or under a trust root.
let trusted = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
let manifest = Data(#"{"app_id":"demo","bundle_format":1}"#.utf8)
let anchor: TrustFile = {
    do {
        let root = try SigningKey.privateKey(SigningKey.privateFile(Curve25519.Signing.PrivateKey()), name: "root")
        return try TrustChange.initial(
            appID: "demo", rootKeys: [root], threshold: 1, expires: Date(timeIntervalSince1970: 4_000_000_000))
    } catch {
        Fuzz.fail("a trust root: \(error)")
    }
}()
let policy = SignatureBlock.Policy(
    anchor: anchor.roots[0], minSequence: 0, now: Date(timeIntervalSince1970: 1_800_000_000))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeys(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Fuzz.bytes(start, count)
    if let pair = try? BundleSigning.privateKey(data, path: "fuzz.key") {
        Fuzz.check(pair.keyID.count == 16, "key id is not 16 digits")
    }
    if let key = try? BundleSigning.publicKey(data, path: "fuzz.pub") {
        Fuzz.check(BundleSigning.keyID(key).count == 16, "key id is not 16 digits")
    }
    guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: trusted) else { Fuzz.fail("trusted key") }
    let finding = BundleSigning.verify(signature: data, manifest: manifest, publicKey: key)
    Fuzz.check(finding != nil, "a fuzzed signature record verified")
    let underTrust = SignatureBlock.verify(signature: data, manifest: manifest, manifestAppID: "demo", policy: policy)
    Fuzz.check(!underTrust.findings.isEmpty, "a fuzzed signature record verified under a trust root")
    if let trust = try? TrustFile.parse(data) {
        Fuzz.check(!trust.roots.isEmpty, "a trust file without roots parsed")
        Fuzz.check((try? TrustFile.parse(trust.data)) == trust, "a trust file does not read back as written")
        // Its numbers keep their digits: each version's, min_sequence's and threshold's, as written (#64).
        let written = String(decoding: trust.data, as: UTF8.self)
        for root in trust.roots.map(\.root) {
            for (name, n) in [
                ("version", root.version), ("min_sequence", root.minSequence), ("threshold", root.threshold),
            ] {
                Fuzz.check(written.contains("\"\(name)\": \(n)"), "\(name) \(n) is not written as its digits")
            }
        }
    }
    return 0
}
