import FlowPilotCore
import Foundation
import Testing

@Suite("build pipelines: bundle pull, diff, sign, keygen and the age guard")
struct BundlePipelineTests {
    @Test(
        "pull then build then validate gives a bundle whose flows equal what the server resolves; a rerun changes nothing"
    )
    func pullBuildValidate() async throws {
        let tmp = try TemporaryDirectory()
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let pull = try fpctl(
            "bundle", "pull", "onboarding", "paywall", "--api-url", server.url, "--app-id", "demo", "-o",
            tmp.file("src"))
        #expect(pull.status == 0, "\(pull.stderr)")
        #expect(try fpctl("bundle", "build", tmp.file("src"), "-o", tmp.file("p.fpbundle")).status == 0)
        #expect(try fpctl("bundle", "validate", tmp.file("p.fpbundle")).status == 0)
        let bundle = try LoadedBundle.open(tmp.file("p.fpbundle"))
        for key in ["onboarding", "paywall"] {
            let served = try await resolve(server, key, user: "")
            let flow = try JSONSerialization.data(withJSONObject: served.json!["flow"]!)
            let doc = try #require(FlowDocument.validate(data: flow, location: key).0)
            #expect(bundle.flows[key]?.document.json == doc.json, "\(key) differs from the server's")
        }
        #expect(
            bundle.media.count == 6 && bundle.fonts.count == 1, "fully offline: every image and font is in the bundle")
        let again = try fpctl(
            "bundle", "pull", "onboarding", "paywall", "--api-url", server.url, "--app-id", "demo", "-o",
            tmp.file("src"))
        #expect(again.stdout.isEmpty && again.stderr.contains("0 files written, 0 removed"))
    }

    @Test("a changed flow on the server makes diff exit 3 and name it")
    func diffDetectsChange() throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("demo")
        let same = try ServeProcess([Paths.sample("demo"), "-q"])
        #expect(try fpctl("bundle", "diff", bundle, "--api-url", same.url, "--app-id", "demo").status == 0)

        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: tmp.file("changed"))
        let flowPath = tmp.file("changed/flows/paywall.json")
        var flow =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: flowPath))) as! [String: Any]
        flow["version"] = "ver_pw_9"
        flow.removeValue(forKey: "content_hash")
        try JSONSerialization.data(withJSONObject: flow).write(to: URL(fileURLWithPath: flowPath))
        let changed = try ServeProcess([tmp.file("changed"), "-q"])
        let diff = try fpctl("bundle", "diff", bundle, "--api-url", changed.url, "--app-id", "demo", "--format", "csv")
        #expect(diff.status == 3)
        #expect(diff.stdout.contains("paywall,changed,flow_paywall/ver_pw_8"))
        #expect(diff.stdout.contains("onboarding,in_sync,"))
    }

    @Test("a signed bundle validates with its key; tampering, no signature or another key fail")
    func signing() throws {
        let tmp = try TemporaryDirectory()
        #expect(try fpctl("bundle", "keygen", "-o", tmp.file("release")).status == 0)
        let mode = try FileManager.default.attributesOfItem(atPath: tmp.file("release.key"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try fpctl("bundle", "keygen", "-o", tmp.file("release")).status == 73, "never replaces a key")
        #expect(try fpctl("bundle", "keygen", "-o", tmp.file("other")).status == 0)
        let bundle = try tmp.buildSample("demo")
        #expect(
            try fpctl("bundle", "validate", bundle, "--public-key", tmp.file("release.pub")).stdout.contains(
                "signature-missing"))
        let unsignedBytes = try Data(contentsOf: URL(fileURLWithPath: bundle))
        #expect(try fpctl("bundle", "sign", bundle, "--key", tmp.file("release.key")).status == 0)
        #expect(try fpctl("bundle", "validate", bundle, "--public-key", tmp.file("release.pub")).status == 0)
        #expect(
            try fpctl("bundle", "validate", bundle, "--public-key", tmp.file("other.pub")).stdout.contains(
                "signature-unknown-key"))
        // Signing again with the same key gives the same bytes (Ed25519 is deterministic).
        let signed = try Data(contentsOf: URL(fileURLWithPath: bundle))
        #expect(try fpctl("bundle", "sign", bundle, "--key", tmp.file("release.key")).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: bundle)) == signed)
        #expect(signed != unsignedBytes)
        // Any flipped byte fails validation.
        for offset in stride(from: 0, to: signed.count, by: max(1, signed.count / 200)) {
            var bytes = signed
            bytes[offset] ^= 0x01
            let tampered = tmp.file("t.fpbundle")
            try bytes.write(to: URL(fileURLWithPath: tampered))
            #expect(
                try fpctl("bundle", "validate", tampered, "--public-key", tmp.file("release.pub")).status == 65,
                "flip at \(offset) passed")
        }
    }

    @Test("a missing image fails pull unless --allow-missing-media")
    func missingMedia() async throws {
        let tmp = try TemporaryDirectory()
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        #expect(try await http(.POST, "\(server.url)/_admin/faults", json: ["fail_media": true]).status == 200)
        let failed = try fpctl(
            "bundle", "pull", "paywall", "--api-url", server.url, "--app-id", "demo", "-o", tmp.file("a"))
        #expect(failed.status == 65)
        #expect(failed.stderr.contains("pull-media"))
        #expect(!FileManager.default.fileExists(atPath: tmp.file("a/bundle.json")))
        let allowed = try fpctl(
            "bundle", "pull", "paywall", "--api-url", server.url, "--app-id", "demo", "-o", tmp.file("b"),
            "--allow-missing-media")
        #expect(allowed.status == 0)
        #expect(allowed.stderr.contains("warning: pull-media"))
    }

    @Test("--max-age warns about an old bundle, and fails it under --strict")
    func maxAge() throws {
        let tmp = try TemporaryDirectory()
        let bundle = try tmp.buildSample("travel")
        let warned = try fpctl("bundle", "validate", bundle, "--max-age", "1d")
        #expect(warned.status == 0 && warned.stdout.contains("warning: bundle-age"))
        #expect(try fpctl("bundle", "validate", bundle, "--max-age", "1d", "--strict").status == 65)
        #expect(try fpctl("bundle", "validate", bundle, "--max-age", "3650d", "--strict").status == 0)
    }
}
