import Crypto
import Foundation
import FuzzSupport

@testable import FlowPilotCore

// Key and signature files: reading either kind of key file, and checking a
// signature record against a manifest, never crashes; a key that loads has a
// 16-digit key id, and a random record never verifies.
let trusted = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
let manifest = Data(#"{"app_id":"demo","bundle_format":1}"#.utf8)

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
    return 0
}
