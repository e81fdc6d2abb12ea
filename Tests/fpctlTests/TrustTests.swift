import Foundation
import Testing

@testable import FlowPilotCore

/// `fpctl trust` and the trust-root form of `manifest.sig` (fpctl-trust(1),
/// fpctl-bundle(5) "Signatures"): every refusal from the command line with its
/// rule and exit status, a rotation end to end, keys handled as secrets, and an
/// independent verifier (openssl) over the bytes the page says are signed.
/// Time is pinned (FPCTL_NOW, SOURCE_DATE_EPOCH) so windows and expiries are exact.
@Suite("trust roots")
struct TrustTests {
    static let start = "2026-06-01T00:00:00Z"
    static let startEpoch = "1780272000"  // 2026-06-01T00:00:00Z

    /// A directory with the demo bundle, keys r1 r2 r3 ci ci2, and trust.json
    /// version 1 (root r1) with `ci` delegated in version 2; `app.json` is
    /// version 1, the copy an app embeds.
    struct Pipeline {
        let tmp: TemporaryDirectory
        let bundle: String
        var env: [String: String] { ["FPCTL_NOW": TrustTests.start, "SOURCE_DATE_EPOCH": TrustTests.startEpoch] }

        init() throws {
            tmp = try TemporaryDirectory()
            bundle = try tmp.buildSample("demo")
            for key in ["r1", "r2", "r3", "ci", "ci2"] {
                let made = try fpctl("bundle", "keygen", "-o", tmp.file(key))
                #expect(made.status == 0, "\(made.stderr)")
            }
            try ok("trust", "init", "-o", f("trust.json"), "--app-id", "demo", "--root-key", f("r1.key"))
            try FileManager.default.copyItem(atPath: f("trust.json"), toPath: f("app.json"))
            try ok("trust", "delegate", f("trust.json"), "--root-key", f("r1.key"), "--public-key", f("ci.pub"))
        }

        func f(_ name: String) -> String { tmp.file(name) }

        @discardableResult
        func run(_ args: String..., env extra: [String: String] = [:]) throws -> ProcessResult {
            try fpctl(args, environment: env.merging(extra) { $1 })
        }

        @discardableResult
        func ok(_ args: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessResult {
            let r = try fpctl(args, environment: env)
            #expect(r.status == 0, "\(args.joined(separator: " ")): \(r.stderr)", sourceLocation: sourceLocation)
            return r
        }

        /// `bundle sign --trust` of the demo bundle into `out`, `env` over the pipeline's environment.
        @discardableResult
        func sign(
            _ out: String, key: String = "ci.key", sequence: Int = 1, extra: [String] = [],
            env extra2: [String: String] = [:]
        ) throws -> ProcessResult {
            try fpctl(
                [
                    "bundle", "sign", bundle, "--key", f(key), "--trust", f("trust.json"), "--sequence",
                    String(sequence),
                    "-o", f(out),
                ] + extra, environment: env.merging(extra2) { $1 })
        }

        /// `validate --trust app.json` of `file`, at `now`.
        func validate(_ file: String, now: String = TrustTests.start, extra: [String] = []) throws -> ProcessResult {
            try fpctl(
                ["bundle", "validate", f(file), "--trust", f("app.json")] + extra,
                environment: env.merging(["FPCTL_NOW": now]) { $1 })
        }

        func trust() throws -> TrustFile { try TrustFile.load(f("trust.json")) }
        func key(_ name: String) throws -> SigningKey.Pair { try SigningKey.loadPrivate(f("\(name).key")) }

        /// The demo bundle signed by `key` with `roots` carried, as the core
        /// makes it with no refusal: what an attacker or a broken pipeline ships.
        func forge(
            _ out: String, key: String = "ci", roots: [SignedRoot], sequence: Int = 1, manifestSHA256: String? = nil
        )
            throws
        {
            let pair = try self.key(key)
            _ = try BundleSigning.sign(bundle, output: f(out), overwrite: true) { manifest, appID in
                let statement = SignatureBlock.Statement(
                    appID: appID, manifestSHA256: manifestSHA256 ?? Digest.sha256Hex(manifest), sequence: sequence,
                    signedAt: RFC3339.parse(TrustTests.start)!, expires: RFC3339.parse("2026-12-01T00:00:00Z")!,
                    keyID: pair.keyID)
                return try SignatureBlock.trustRoot(statement: statement, key: pair, roots: roots)
            }
        }
    }

    /// The one finding line of a refused bundle: its rule, and exit status 65.
    func expectRefused(_ r: ProcessResult, _ rule: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 65, "\(r.stdout)\(r.stderr)", sourceLocation: sourceLocation)
        #expect(r.stdout.contains(": \(rule): manifest.sig: "), "\(r.stdout)", sourceLocation: sourceLocation)
    }

    @Test(
        "a rotation end to end: revoke, delegate, rotate the root twice; the app's version 1 trusts the newest bundle")
    func rotation() throws {
        let p = try Pipeline()
        #expect(try p.sign("v2.fpbundle", sequence: 1).status == 0)
        let first = try p.validate("v2.fpbundle")
        #expect(first.status == 0, "\(first.stdout)")
        let ciID = try p.key("ci").keyID
        #expect(first.stdout.contains("(signed: trust-root form, key \(ciID), sequence 1, root version 2)"))
        // The key leaks: revoke it (raising the minimum sequence), delegate a new one,
        // rotate the root to r2, then to r2 and r3 with threshold 2.
        try p.ok(
            "trust", "revoke", p.f("trust.json"), "--root-key", p.f("r1.key"), "--key-id", ciID, "--min-sequence", "2")
        try p.ok("trust", "delegate", p.f("trust.json"), "--root-key", p.f("r1.key"), "--public-key", p.f("ci2.pub"))
        try p.ok("trust", "rotate", p.f("trust.json"), "--root-key", p.f("r1.key"), "--new-root-key", p.f("r2.key"))
        try p.ok(
            "trust", "rotate", p.f("trust.json"), "--root-key", p.f("r2.key"), "--new-root-key", p.f("r2.key"),
            "--new-root-key", p.f("r3.key"), "--threshold", "2")
        let trust = try p.trust()
        #expect(trust.roots.map(\.root.version) == [1, 2, 3, 4, 5, 6])
        #expect(trust.current.threshold == 2 && trust.current.rootKeys.count == 2)
        #expect(trust.current.revoked == [ciID])
        let show = try p.ok("trust", "show", p.f("trust.json"), "--format", "json")
        #expect(show.stdout.contains(#""threshold":2"#) && show.stdout.contains(#""version":6,"versions""#))
        #expect(show.stdout.contains(#"{"key_id":"\#(ciID)","role":"revoked"}"#))
        let table = try p.ok("trust", "show", p.f("trust.json"))
        #expect(table.stdout.contains("threshold     2 of 2 root keys"))
        #expect(try p.run("trust", "show", p.f("trust.json"), "--format", "csv").status == 64)
        // The newest bundle, by the new key under version 6, validates against the app's version 1.
        #expect(try p.sign("v6.fpbundle", key: "ci2.key", sequence: 2).status == 0)
        let newest = try p.validate("v6.fpbundle")
        #expect(newest.status == 0, "\(newest.stdout)")
        #expect(newest.stdout.contains("root version 6"))
        // bundle sign refuses the revoked key before writing anything...
        let refused = try p.sign("revoked.fpbundle", key: "ci.key", sequence: 3)
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("key \(ciID) is revoked in root version 6"))
        #expect(!FileManager.default.fileExists(atPath: p.f("revoked.fpbundle")))
        // ...and a bundle the revoked key signs anyway, carrying the chain, is refused.
        try p.forge("revoked.fpbundle", roots: trust.roots, sequence: 3)
        expectRefused(try p.validate("revoked.fpbundle"), "signature-key-revoked")
        // What an offline validator cannot know: the same key's bundle carrying only
        // the chain from before the revocation passes against version 1 alone...
        try p.forge("stale-chain.fpbundle", roots: Array(trust.roots.prefix(2)), sequence: 1)
        #expect(try p.validate("stale-chain.fpbundle").status == 0)
        // ...and is bounded by the sequence the app already has (--min-sequence), or by
        // a newer root the app embeds (its min_sequence and revocation).
        expectRefused(try p.validate("stale-chain.fpbundle", extra: ["--min-sequence", "2"]), "signature-rollback")
        try FileManager.default.removeItem(atPath: p.f("app.json"))
        try FileManager.default.copyItem(atPath: p.f("trust.json"), toPath: p.f("app.json"))
        expectRefused(try p.validate("stale-chain.fpbundle"), "signature-key-revoked")
        #expect(try p.validate("v6.fpbundle").status == 0)
    }

    @Test("wrong app, an expired bundle, an expired delegation and a rollback each have their rule and exit 65")
    func refusals() throws {
        let p = try Pipeline()
        #expect(try p.sign("s.fpbundle", sequence: 5, extra: ["--expires", "30d"]).status == 0)
        #expect(try p.validate("s.fpbundle").status == 0)
        // The signature's own expiry (30 days), and the delegation's (90 days by default).
        expectRefused(try p.validate("s.fpbundle", now: "2026-07-02T00:00:00Z"), "signature-expired")
        #expect(try p.sign("long.fpbundle", sequence: 5, extra: ["--expires", "365d"]).status == 0)
        let late = try p.validate("long.fpbundle", now: "2026-09-01T00:00:00Z")
        expectRefused(late, "signature-key-expired")
        #expect(!late.stdout.contains("signature-expired"))
        // Rollback: below --min-sequence, and below the root's own min_sequence.
        expectRefused(try p.validate("s.fpbundle", extra: ["--min-sequence", "6"]), "signature-rollback")
        try p.ok(
            "trust", "delegate", p.f("trust.json"), "--root-key", p.f("r1.key"), "--public-key", p.f("ci.pub"),
            "--min-sequence", "9")
        let below = try p.sign("low.fpbundle", sequence: 8)
        #expect(below.status == 64 && below.stderr.contains("below root version 3's min_sequence 9"))
        try p.forge("low.fpbundle", roots: try p.trust().roots, sequence: 8)
        let rollback = try p.validate("low.fpbundle")
        expectRefused(rollback, "signature-rollback")
        #expect(rollback.stdout.contains("(root version 3)"))
        // A lower minimum is refused: it would let old bundles back.
        #expect(
            try p.run(
                "trust", "revoke", p.f("trust.json"), "--root-key", p.f("r1.key"), "--key-id",
                try p.key("ci").keyID, "--min-sequence", "1"
            ).status == 64)
        // Wrong app: a trust root for another app that delegates the same key.
        try p.ok("trust", "init", "-o", p.f("other.json"), "--app-id", "other", "--root-key", p.f("r2.key"))
        try p.ok("trust", "delegate", p.f("other.json"), "--root-key", p.f("r2.key"), "--public-key", p.f("ci.pub"))
        let refusedWrongApp = try p.run(
            "bundle", "sign", p.bundle, "--key", p.f("ci.key"), "--trust", p.f("other.json"), "--sequence", "1", "-o",
            p.f("w.fpbundle"))
        #expect(refusedWrongApp.status == 64 && refusedWrongApp.stderr.contains("the trust root is for app other"))
        try p.forge("w.fpbundle", roots: try TrustFile.load(p.f("other.json")).roots)
        let wrong = try p.run("bundle", "validate", p.f("w.fpbundle"), "--trust", p.f("other.json"))
        expectRefused(wrong, "signature-wrong-app")
        #expect(wrong.stdout.contains("is for app demo, the trust root for app other"))
        // The trust root's own expiry: validate refuses, sign refuses to sign under it.
        expectRefused(try p.validate("s.fpbundle", now: "2027-07-01T00:00:00Z"), "trust-root-expired")
        let stale = try p.run(
            "bundle", "sign", p.bundle, "--key", p.f("ci.key"), "--trust", p.f("trust.json"), "--sequence", "9", "-o",
            p.f("late.fpbundle"), env: ["FPCTL_NOW": "2027-07-01T00:00:00Z"])
        #expect(stale.status == 64 && stale.stderr.contains("root version 3 expired at 2027-06-01T00:00:00Z"))
        // Every --format names the rule.
        let sarif = try p.validate("s.fpbundle", extra: ["--min-sequence", "6", "--format", "sarif"])
        #expect(sarif.status == 65 && sarif.stdout.contains(#""ruleId":"signature-rollback""#))
        let json = try p.validate("s.fpbundle", extra: ["--format", "json"])
        #expect(json.stdout.contains(#""form":"trust_root""#) && json.stdout.contains(#""sequence":5"#))
    }

    @Test(
        "chains that skip, truncate or reorder versions, a threshold met by one key twice, a root signed by the new keys only"
    )
    func brokenChains() throws {
        let p = try Pipeline()
        try p.ok("trust", "delegate", p.f("trust.json"), "--root-key", p.f("r1.key"), "--public-key", p.f("ci2.pub"))
        let roots = try p.trust().roots  // versions 1, 2, 3
        try p.forge("skip.fpbundle", roots: [roots[0], roots[2]])
        let skip = try p.validate("skip.fpbundle")
        expectRefused(skip, "trust-root-version")
        #expect(skip.stdout.contains("root version 3 follows version 1"))
        try p.forge("truncated.fpbundle", roots: [roots[2]])
        expectRefused(try p.validate("truncated.fpbundle"), "trust-root-version")
        try p.forge("reordered.fpbundle", roots: [roots[0], roots[2], roots[1]])
        expectRefused(try p.validate("reordered.fpbundle"), "trust-root-version")
        try p.forge("whole.fpbundle", roots: roots)
        #expect(try p.validate("whole.fpbundle").status == 0)

        // Version 2 with root keys r1 and r2, threshold 2; version 3 signed by r1 twice.
        var v2 = roots[0].root
        v2.version = 2
        v2.rootKeys[try p.key("r2").keyID] = try p.key("r2").publicKey.rawRepresentation
        v2.threshold = 2
        v2.signingKeys = roots[1].root.signingKeys
        let signedV2 = try SignedRoot(root: v2, signedBy: [p.key("r1"), p.key("r2")])
        var v3 = v2
        v3.version = 3
        let once = try SignedRoot(root: v3, signedBy: [p.key("r1")])
        let twice = SignedRoot(root: v3, signatures: once.signatures + once.signatures)
        try p.forge("twice.fpbundle", roots: [roots[0], signedV2, twice])
        let doubled = try p.validate("twice.fpbundle")
        expectRefused(doubled, "trust-root-threshold")
        #expect(doubled.stdout.contains("root version 3 is signed by 1 of version 2's root keys, threshold 2"))
        try p.forge(
            "both.fpbundle",
            roots: [roots[0], signedV2, try SignedRoot(root: v3, signedBy: [p.key("r1"), p.key("r2")])])
        #expect(try p.validate("both.fpbundle").status == 0)
        // trust init counts a key given twice once, and says so.
        let init2 = try p.run(
            "trust", "init", "-o", p.f("t2.json"), "--app-id", "demo", "--root-key", p.f("r1.key"), "--root-key",
            p.f("r1.key"), "--threshold", "2")
        #expect(init2.status == 64 && init2.stderr.contains("given twice"))

        // A rotation signed by the new root key only.
        var rotated = roots[1].root
        rotated.version = 3
        rotated.rootKeys = [try p.key("r3").keyID: try p.key("r3").publicKey.rawRepresentation]
        try p.forge(
            "newonly.fpbundle", roots: [roots[0], roots[1], try SignedRoot(root: rotated, signedBy: [p.key("r3")])])
        let newOnly = try p.validate("newonly.fpbundle")
        expectRefused(newOnly, "trust-root-threshold")
        #expect(newOnly.stdout.contains("signed by 0 of version 2's root keys"))
        // The CLI will not write one either.
        let cli = try p.run(
            "trust", "rotate", p.f("trust.json"), "--root-key", p.f("r3.key"), "--new-root-key", p.f("r3.key"))
        #expect(cli.status == 64 && cli.stderr.contains("0 of version 3's root keys given, threshold 1"))

        // A signature over a manifest changed after signing.
        try p.forge("changed.fpbundle", roots: roots, manifestSHA256: String(repeating: "0", count: 64))
        let changed = try p.validate("changed.fpbundle")
        expectRefused(changed, "signature-invalid")
        #expect(changed.stdout.contains("changed after signing"))
        // A trust.json whose version 2 was edited after signing is refused when read.
        var text = try String(contentsOfFile: p.f("trust.json"), encoding: .utf8)
        text = text.replacingOccurrences(of: #""min_sequence": 0,"#, with: #""min_sequence": 7,"#)
        try text.write(toFile: p.f("edited.json"), atomically: true, encoding: .utf8)
        let edited = try p.run("trust", "show", p.f("edited.json"))
        #expect(edited.status == 65 && edited.stderr.contains("trust-root-threshold"))
    }

    @Test("the single-key form still validates with --public-key; --trust names the form it read")
    func oldForm() throws {
        let p = try Pipeline()
        #expect(try p.run("bundle", "sign", p.bundle, "--key", p.f("ci.key"), "-o", p.f("old.fpbundle")).status == 0)
        let ciID = try p.key("ci").keyID
        let byKey = try p.run("bundle", "validate", p.f("old.fpbundle"), "--public-key", p.f("ci.pub"))
        #expect(byKey.status == 0 && byKey.stdout.contains("(signed: single-key form, key \(ciID))"))
        let underTrust = try p.validate("old.fpbundle")
        expectRefused(underTrust, "signature-form")
        #expect(underTrust.stdout.contains("signed in the single-key form by key"))
        // A trust-root-form bundle checks against its signing key alone too.
        #expect(try p.sign("new.fpbundle").status == 0)
        #expect(try p.run("bundle", "validate", p.f("new.fpbundle"), "--public-key", p.f("ci.pub")).status == 0)
        let other = try p.run("bundle", "validate", p.f("new.fpbundle"), "--public-key", p.f("ci2.pub"))
        #expect(other.status == 65 && other.stdout.contains("signature-unknown-key"))
        // inspect shows the signature's form and key id.
        let inspect = try p.run("bundle", "inspect", p.f("new.fpbundle"))
        #expect(inspect.stdout.contains("signature   trust-root form, key \(ciID), sequence 1"))
    }

    @Test("the same bundle, keys, trust.json and SOURCE_DATE_EPOCH give the same bytes")
    func reproducible() throws {
        let p = try Pipeline()
        #expect(try p.sign("a.fpbundle", sequence: 4).status == 0)
        #expect(try p.sign("b.fpbundle", sequence: 4).status == 0)
        let a = try Data(contentsOf: URL(fileURLWithPath: p.f("a.fpbundle")))
        #expect(a == (try Data(contentsOf: URL(fileURLWithPath: p.f("b.fpbundle")))))
        // An hour earlier (a day later would be refused: signed_at past the 5 minutes' skew, #64).
        let later = try p.run(
            "bundle", "sign", p.bundle, "--key", p.f("ci.key"), "--trust", p.f("trust.json"), "--sequence", "4", "-o",
            p.f("c.fpbundle"), env: ["SOURCE_DATE_EPOCH": "1780268400"])
        #expect(later.status == 0)
        #expect(a != (try Data(contentsOf: URL(fileURLWithPath: p.f("c.fpbundle")))), "signed_at is signed")
        // A SOURCE_DATE_EPOCH from before the delegation (the commit's time) signs and
        // validates: the delegation must hold now, and not have ended at signed_at.
        let earlier = try p.run(
            "bundle", "sign", p.bundle, "--key", p.f("ci.key"), "--trust", p.f("trust.json"), "--sequence", "4", "-o",
            p.f("d.fpbundle"), env: ["SOURCE_DATE_EPOCH": "1779667200"])
        #expect(earlier.status == 0, "\(earlier.stderr)")
        #expect(try p.validate("d.fpbundle").status == 0)
        // A delegation that has ended refuses the signing, and nothing is written.
        let ended = try p.run(
            "bundle", "sign", p.bundle, "--key", p.f("ci.key"), "--trust", p.f("trust.json"), "--sequence", "4", "-o",
            p.f("e.fpbundle"), env: ["FPCTL_NOW": "2026-12-01T00:00:00Z"])
        #expect(ended.status == 64 && ended.stderr.contains("not now (2026-12-01T00:00:00Z)"))
        #expect(!FileManager.default.fileExists(atPath: p.f("e.fpbundle")))
        // A SOURCE_DATE_EPOCH so far back that the signature (90 days by default) has expired by now:
        // what validate would refuse as signature-expired is refused here, and nothing is written (#64).
        let stale = try p.sign("f.fpbundle", sequence: 4, env: ["SOURCE_DATE_EPOCH": "0"])
        #expect(stale.status == 64, "\(stale.stderr)")
        #expect(stale.stderr.contains("the signature would expire at 1970-"), "\(stale.stderr)")
        #expect(!FileManager.default.fileExists(atPath: p.f("f.fpbundle")))
    }

    @Test(
        "app ids are compared as bytes: a root for \"cafe\u{301}\" (decomposed) signs no bundle of \"caf\u{e9}\" (#64)"
    )
    func appIDBytes() throws {
        let p = try Pipeline()
        let source = p.f("cafe-source")
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: source)
        let manifest = source + "/bundle.json"
        let text = try String(contentsOfFile: manifest, encoding: .utf8)
        try text.replacingOccurrences(of: #""app_id": "demo""#, with: "\"app_id\": \"caf\u{e9}\"")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(try fpctl("bundle", "build", source, "-o", p.f("cafe.fpbundle")).status == 0)
        try p.ok("trust", "init", "-o", p.f("nfd.json"), "--app-id", "cafe\u{301}", "--root-key", p.f("r1.key"))
        try p.ok("trust", "delegate", p.f("nfd.json"), "--root-key", p.f("r1.key"), "--public-key", p.f("ci.pub"))
        let signed = try p.run(
            "bundle", "sign", p.f("cafe.fpbundle"), "--key", p.f("ci.key"), "--trust", p.f("nfd.json"), "--sequence",
            "1", "-o", p.f("cafe-signed.fpbundle"))
        #expect(signed.status == 64, "\(signed.stderr)")
        #expect(signed.stderr.contains("the trust root is for app cafe\u{301}, the bundle for caf\u{e9}"))
        #expect(!FileManager.default.fileExists(atPath: p.f("cafe-signed.fpbundle")))
    }

    @Test("private keys: others may not read them; env:NAME and fd:N work; the key is never printed")
    func keysAsSecrets() throws {
        let p = try Pipeline()
        chmod(p.f("ci.key"), 0o640)
        let open = try p.sign("x.fpbundle")
        #expect(open.status == 65)
        #expect(open.stderr.contains("key-permissions") && open.stderr.contains("chmod 600"))
        #expect(!FileManager.default.fileExists(atPath: p.f("x.fpbundle")))
        chmod(p.f("ci.key"), 0o600)
        let secret = try String(contentsOfFile: p.f("ci.key"), encoding: .utf8)
        let raw = try #require(try JSONValue.parse(Data(secret.utf8))["private_key"]?.stringValue)
        let byEnv = try fpctl(
            [
                "bundle", "sign", p.bundle, "--key", "env:CI_SIGNING_KEY", "--trust", p.f("trust.json"), "--sequence",
                "1",
                "-o", p.f("env.fpbundle"),
            ], environment: p.env.merging(["CI_SIGNING_KEY": secret]) { $1 })
        #expect(byEnv.status == 0, "\(byEnv.stderr)")
        #expect(!(byEnv.stdout + byEnv.stderr).contains(raw))
        #expect(try p.validate("env.fpbundle").status == 0)
        let unset = try p.run("bundle", "sign", p.bundle, "--key", "env:NO_SUCH_KEY_VAR", "-o", p.f("u.fpbundle"))
        #expect(
            unset.status == 66
                && unset.stderr.contains("env:NO_SUCH_KEY_VAR: the environment variable NO_SUCH_KEY_VAR is not set"))
        let byFD = try run(
            Paths.fpctl,
            [
                "bundle", "sign", p.bundle, "--key", "fd:0", "--trust", p.f("trust.json"), "--sequence", "1", "-o",
                p.f("fd.fpbundle"),
            ], environment: p.env, stdinFile: p.f("ci.key"))
        #expect(byFD.status == 0, "\(byFD.stderr)")
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: p.f("fd.fpbundle")))
                == (try Data(contentsOf: URL(fileURLWithPath: p.f("env.fpbundle")))))
        // A root key from the environment; a broken key file names itself, never its bytes.
        let rootSecret = try String(contentsOfFile: p.f("r1.key"), encoding: .utf8)
        let rooted = try fpctl(
            ["trust", "revoke", p.f("trust.json"), "--root-key", "env:ROOT_KEY", "--key-id", try p.key("ci").keyID],
            environment: p.env.merging(["ROOT_KEY": rootSecret]) { $1 })
        #expect(rooted.status == 0, "\(rooted.stderr)")
        let broken = try fpctl(
            ["bundle", "sign", p.bundle, "--key", "env:BROKEN", "-o", p.f("b.fpbundle")],
            environment: ["BROKEN": String(secret.dropLast(20))])
        #expect(broken.status == 65 && broken.stderr.contains("env:BROKEN: not an fpctl ed25519 private key file"))
        #expect(!broken.stderr.contains(String(raw.prefix(12))))
    }

    @Test("an independent verifier (openssl) checks the statement, the manifest digest and every root version")
    func interoperability() throws {
        let p = try Pipeline()
        try p.ok("trust", "rotate", p.f("trust.json"), "--root-key", p.f("r1.key"), "--new-root-key", p.f("r2.key"))
        #expect(try p.sign("s.fpbundle", sequence: 3).status == 0)
        let script = Paths.packageRoot.appendingPathComponent("Tests/trust/verify_openssl.py").path
        let good = try run("/usr/bin/env", ["python3", script, p.f("s.fpbundle"), p.f("app.json")])
        #expect(good.status == 0, "\(good.stdout)\(good.stderr)")
        let ciID = try p.key("ci").keyID
        #expect(good.stdout.contains("verified: statement by \(ciID), sequence 3, roots 1..3"))
        try p.forge("changed.fpbundle", roots: try p.trust().roots, manifestSHA256: String(repeating: "0", count: 64))
        let bad = try run("/usr/bin/env", ["python3", script, p.f("changed.fpbundle"), p.f("app.json")])
        #expect(bad.status == 1 && bad.stdout.contains("manifest sha256"))
    }
}
