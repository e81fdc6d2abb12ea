import Foundation
import Testing

@testable import FlowPilotCore

/// Values kept as they were sent (#64): integers beyond a double's 53 bits
/// through serve, warm, the cache and resolve; identities and names compared
/// by their UTF-8 bytes, never by Unicode equivalence ("caf\u{e9}" precomposed
/// and "cafe\u{301}" decomposed are two users, two placements); numbers that a
/// signed statement or a trust root must hold refused outside their range
/// before anything is written, and accepted only in their one spelling.
@Suite("exact values: integers and names as their bytes")
struct ExactValuesTests {
    static let nfc = "caf\u{e9}"
    static let nfd = "cafe\u{301}"

    /// The demo source with its paywall flow carrying 64-bit integers (no content hash, which the edit would break).
    static func bigIntegerSource(_ tmp: TemporaryDirectory) throws -> String {
        let source = tmp.file("big")
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: source)
        let path = source + "/flows/paywall.json"
        var text = try String(contentsOfFile: path, encoding: .utf8)
        text = text.replacingOccurrences(of: #",\s*"content_hash": "[^"]*""#, with: "", options: .regularExpression)
        text = text.replacingOccurrences(
            of: "\"schema_version\": 1,",
            with:
                "\"schema_version\": 1, \"price_micros\": 1234567890123456789, \"odd\": 9007199254740993, \"max\": 9223372036854775807, \"min\": -9223372036854775808, \"half\": 0.5,"
        )
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return source
    }

    static let digits = [
        "\"price_micros\":1234567890123456789", "\"odd\":9007199254740993", "\"max\":9223372036854775807",
        "\"min\":-9223372036854775808", "\"half\":0.5",
    ]

    @Test("a flow's 64-bit integers reach the cache and resolve --output as the backend's digits")
    func integersEndToEnd() throws {
        let tmp = try TemporaryDirectory()
        let server = try ServeProcess([try Self.bigIntegerSource(tmp), "-q", "--rewrite-asset-urls"])
        let cache = tmp.file("cache")
        let backend = ["--api-url", server.url, "--app-id", "demo", "--user-id", "u-1"]
        let warm = try fpctl(["warm", "paywall"] + backend + ["--cache-dir", cache, "--media", "none"])
        #expect(warm.status == 0, "\(warm.stderr)")
        // From the backend, and again from the cache the warm filled (no backend: a closed port).
        let live = try fpctl(
            ["resolve", "paywall"] + backend + ["--cache-dir", tmp.file("other"), "--output", tmp.file("live.json")])
        #expect(live.status == 0, "\(live.stderr)")
        let cached = try fpctl(
            [
                "resolve", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--user-id", "u-1",
                "--cache-dir", cache, "--output", tmp.file("cached.json"),
            ])
        #expect(cached.status == 0, "\(cached.stderr)")
        #expect(cached.stdout.contains("cache"), "\(cached.stdout)")
        for file in ["live.json", "cached.json"] {
            let text = try String(contentsOfFile: tmp.file(file), encoding: .utf8)
                .replacingOccurrences(of: " ", with: "")
            for d in Self.digits { #expect(text.contains(d), "\(file) lacks \(d): \(text.prefix(300))") }
            #expect(!text.contains("e+18"), "\(file)")
        }
        // bundle pull writes the backend's digits into the source it makes.
        let pull = try fpctl(
            "bundle", "pull", "paywall", "--api-url", server.url, "--app-id", "demo", "-o", tmp.file("pulled"))
        #expect(pull.status == 0, "\(pull.stderr)")
        let pulled = try String(contentsOfFile: tmp.file("pulled") + "/flows/paywall.json", encoding: .utf8)
        #expect(pulled.contains("\"price_micros\": 1234567890123456789"), "\(pulled.prefix(300))")
        #expect(pulled.contains("\"odd\": 9007199254740993"))
        // cache put of the same flow file stores the same bytes: verify finds the entry sound.
        let put = tmp.file("put.jsonl")
        try #"{"placement":"paywall","user_id":"u-2","flow_file":"\#(tmp.file("big"))/flows/paywall.json"}"#
            .write(toFile: put, atomically: true, encoding: .utf8)
        #expect(try fpctl("cache", "put", "--cache-dir", cache, "--input", put).status == 0)
        #expect(try fpctl("cache", "verify", "--cache-dir", cache).status == 0)
    }

    @Test("a number parsed and written again keeps its digits; 5.0, 5e0 and -0 stay doubles")
    func parserKeepsDigits() throws {
        for text in ["1234567890123456789", "9007199254740993", "9223372036854775807", "-9223372036854775808", "0"] {
            let value = try JSONValue.parse(Data(text.utf8))
            #expect(value.integerValue != nil, "\(text)")
            #expect(CanonicalJSON.string(value) == text)
        }
        for (text, canonical) in [
            ("5.0", "5"), ("5e0", "5"), ("0.5e1", "5"), ("-0", "0"), ("9223372036854775808", "9223372036854775808"),
        ] {
            let value = try JSONValue.parse(Data(text.utf8))
            #expect(value.integerValue == nil, "\(text) is not an integer's one spelling")
            if text != "9223372036854775808" { #expect(CanonicalJSON.string(value) == canonical, "\(text)") }
        }
        // Equal as JSON values where exactly equal, never through a rounding.
        #expect(JSONValue.integer(5) == .number(5))
        #expect(JSONValue.integer(9_007_199_254_740_993) != .number(9_007_199_254_740_992))
        #expect(JSONValue.string(Self.nfc) != .string(Self.nfd))
    }

    @Test("--sequence and --min-sequence past 2^53 - 1 are refused (64) before anything is written")
    func signedRanges() throws {
        let p = try TrustTests.Pipeline()
        let before = try Data(contentsOf: URL(fileURLWithPath: p.f("trust.json")))
        for sequence in [9_007_199_254_740_992, Int.max] {
            let r = try p.sign("big.fpbundle", sequence: sequence)
            #expect(r.status == 64, "\(r.stderr)")
            #expect(r.stderr.contains("--sequence \(sequence) is out of range (0 to 9007199254740991"), "\(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: p.f("big.fpbundle")))
        }
        let largest = try p.sign("largest.fpbundle", sequence: 9_007_199_254_740_991)
        #expect(largest.status == 0, "\(largest.stderr)")
        let valid = try p.validate("largest.fpbundle", extra: ["--format", "json"])
        #expect(valid.status == 0, "\(valid.stdout)\(valid.stderr)")
        #expect(valid.stdout.contains("\"sequence\":9007199254740991"), "\(valid.stdout)")
        let delegate = try p.run(
            "trust", "delegate", p.f("trust.json"), "--root-key", p.f("r1.key"), "--public-key", p.f("ci2.pub"),
            "--min-sequence", "9007199254740993")
        #expect(delegate.status == 64, "\(delegate.stderr)")
        #expect(delegate.stderr.contains("--min-sequence 9007199254740993 is out of range"), "\(delegate.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: p.f("trust.json"))) == before, "trust.json untouched")
        #expect(try p.run("trust", "show", p.f("trust.json")).status == 0)
    }

    /// The demo bundle signed by `ci` over a statement whose JSON `edit` rewrites after signing.
    func forgeText(
        _ p: TrustTests.Pipeline, _ out: String, signedAt: String = TrustTests.start,
        expires: String = "2026-12-01T00:00:00Z", bundle: String? = nil, trust: String = "trust.json",
        appID stated: String? = nil, edit: @escaping (String) -> String = { $0 }
    ) throws {
        let pair = try p.key("ci")
        let roots = try TrustFile.load(p.f(trust)).roots
        _ = try BundleSigning.sign(bundle ?? p.bundle, output: p.f(out), overwrite: true) { manifest, appID in
            let statement = SignatureBlock.Statement(
                appID: stated ?? appID, manifestSHA256: Digest.sha256Hex(manifest), sequence: 5,
                signedAt: RFC3339.parse(signedAt)!, expires: RFC3339.parse(expires)!, keyID: pair.keyID)
            let block = try SignatureBlock.trustRoot(statement: statement, key: pair, roots: roots)
            return Data(edit(String(decoding: block, as: UTF8.self)).utf8)
        }
    }

    @Test("a signed sequence spelled 5.0, 5e0 or 0.5e1 is signature-invalid; 5 validates")
    func canonicalSpelling() throws {
        let p = try TrustTests.Pipeline()
        try forgeText(p, "plain.fpbundle")
        #expect(try p.validate("plain.fpbundle").status == 0)
        for spelling in ["5.0", "5e0", "0.5e1", "5.000000000000000001"] {
            try forgeText(p, "odd.fpbundle") {
                $0.replacingOccurrences(of: "\"sequence\": 5,", with: "\"sequence\": \(spelling),")
            }
            let r = try p.validate("odd.fpbundle")
            #expect(r.status == 65, "\(spelling): \(r.stdout)")
            #expect(r.stdout.contains("signature-invalid") && r.stdout.contains("signed.sequence"), "\(r.stdout)")
        }
    }

    @Test(
        "signed_at ahead of the clock is signature-future, expires not after signed_at signature-invalid; sign refuses both"
    )
    func signingTimes() throws {
        let p = try TrustTests.Pipeline()
        // Within the 5 minutes' skew: valid; beyond it: signature-future.
        try forgeText(p, "near.fpbundle", signedAt: "2026-06-01T00:04:59Z")
        #expect(try p.validate("near.fpbundle").status == 0)
        try forgeText(p, "far.fpbundle", signedAt: "2026-06-02T00:00:00Z")
        let far = try p.validate("far.fpbundle")
        #expect(far.status == 65 && far.stdout.contains("signature-future"), "\(far.stdout)")
        try forgeText(p, "inverted.fpbundle", signedAt: "2026-06-01T00:00:00Z", expires: "2026-06-01T00:00:00Z")
        let inverted = try p.validate("inverted.fpbundle")
        #expect(
            inverted.status == 65 && inverted.stdout.contains("signed.expires: after signed_at"), "\(inverted.stdout)")
        // bundle sign with a SOURCE_DATE_EPOCH a day ahead of now: refused, nothing written.
        let ahead = try p.sign("ahead.fpbundle", sequence: 2, env: ["SOURCE_DATE_EPOCH": "1780358400"])
        #expect(ahead.status == 64, "\(ahead.stderr)")
        #expect(ahead.stderr.contains("more than 300 s after now"), "\(ahead.stderr)")
        #expect(!FileManager.default.fileExists(atPath: p.f("ahead.fpbundle")))
    }

    @Test("a root version that changes app_id from precomposed to decomposed is refused")
    func rootAppIDBytes() throws {
        let p = try TrustTests.Pipeline()
        let trust = try p.trust()
        var next = trust.current
        next.version += 1
        next.appID = Self.nfd
        let signed = try SignedRoot(root: next, signedBy: [try p.key("r1")])
        var first = trust.current
        first.appID = Self.nfc
        let anchor = try SignedRoot(root: first, signedBy: [try p.key("r1")])
        #expect(throws: TrustProblem.self) { try TrustFile.walk(from: anchor, through: [signed]) }
    }

    /// Entries for user "café" (precomposed) at placement "café" and "paywall", through `cache put`.
    func cafeCache(_ tmp: TemporaryDirectory, format: String) throws -> (cache: String, env: [String: String]) {
        let cache = tmp.file("cache-\(format)")
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        var lines = ""
        for (placement, user) in [("paywall", Self.nfc), (Self.nfc, Self.nfc), ("paywall", "other")] {
            lines += #"{"placement":"\#(placement)","user_id":"\#(user)","flow_file":"\#(flow)"}"# + "\n"
        }
        try lines.write(toFile: tmp.file("in-\(format).jsonl"), atomically: true, encoding: .utf8)
        let env = ["FPCTL_CACHE_FORMAT": format]
        let put = try fpctl(
            ["cache", "put", "--cache-dir", cache, "--input", tmp.file("in-\(format).jsonl")], environment: env)
        #expect(put.status == 0, "\(put.stderr)")
        return (cache, env)
    }

    @Test("list, prune and lookups take a decomposed user id or placement as another one", arguments: ["1", "2"])
    func namesAsBytes(format: String) throws {
        let tmp = try TemporaryDirectory()
        let (cache, env) = try cafeCache(tmp, format: format)
        func csv(_ args: [String]) throws -> [String] {
            let r = try fpctl(["cache", "list", "--cache-dir", cache, "--format", "csv"] + args, environment: env)
            #expect(r.status == 0, "\(r.stderr)")
            return r.stdout.split(separator: "\n").dropFirst().map(String.init)
        }
        #expect(try csv(["--user-id", Self.nfd]).isEmpty)
        #expect(try csv(["--placement", Self.nfd]).isEmpty)
        #expect(try csv(["--user-id", Self.nfc]).count == 2)
        #expect(try csv(["--placement", Self.nfc]).count == 1)
        let prune = try fpctl(
            ["cache", "prune", "--cache-dir", cache, "--user-id", Self.nfd, "--format", "csv"], environment: env)
        #expect(prune.status == 0, "\(prune.stderr)")
        #expect(try csv([]).count == 3, "prune --user-id cafe\u{301} removed caf\u{e9}'s entries: \(prune.stdout)")
        // A lookup for the decomposed user misses the precomposed one's entry.
        // (Tier 2 then serves the placement's last-known-good alias, as for any other user.)
        let miss = try fpctl(
            [
                "resolve", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--user-id", Self.nfd,
                "--cache-dir", cache, "--timeout", "2s",
            ], environment: env)
        #expect(miss.stdout.contains("tier 0 cache: no entry for this identity"), "\(miss.stdout)")
        let hit = try fpctl(
            [
                "resolve", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo", "--user-id", Self.nfc,
                "--cache-dir", cache, "--timeout", "2s",
            ], environment: env)
        #expect(hit.status == 0 && hit.stdout.contains("result: cache (tier 0)"), "\(hit.stdout)\(hit.stderr)")
        let removed = try fpctl(
            ["cache", "prune", "--cache-dir", cache, "--user-id", Self.nfc, "--format", "csv"], environment: env)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try csv([]).count == 1)
    }

    @Test("cache info counts a precomposed and a decomposed placement as two rows")
    func infoPlacements() throws {
        let tmp = try TemporaryDirectory()
        let cache = tmp.file("cache")
        let flow = Paths.sample("demo") + "/flows/paywall.json"
        let lines = [Self.nfc, Self.nfd].map { #"{"placement":"\#($0)","user_id":"u","flow_file":"\#(flow)"}"# }
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: tmp.file("in.jsonl"), atomically: true, encoding: .utf8)
        #expect(try fpctl("cache", "put", "--cache-dir", cache, "--input", tmp.file("in.jsonl")).status == 0)
        let info = try fpctl("cache", "info", "--cache-dir", cache, "--format", "csv")
        #expect(info.status == 0, "\(info.stderr)")
        let rows = info.stdout.split(separator: "\n").dropFirst()
        #expect(rows.count == 2, "\(info.stdout)")
        #expect(rows.allSatisfy { $0.contains(",1,") }, "\(info.stdout)")
    }

    @Test(
        "the independent verifier (Tests/trust) agrees with validate on large, non-canonical and ill-timed statements and on app ids as bytes"
    )
    func verifierAgrees() throws {
        let p = try TrustTests.Pipeline()
        let script = Paths.packageRoot.appendingPathComponent("Tests/trust/verify_openssl.py").path
        func verifier(_ file: String) throws -> ProcessResult {
            let app = file.hasPrefix("cafe") ? "nfc.json" : "app.json"
            return try run("/usr/bin/env", ["python3", script, p.f(file), p.f(app), TrustTests.start])
        }
        func validate(_ file: String) throws -> ProcessResult {
            let app = file.hasPrefix("cafe") ? "nfc.json" : "app.json"
            return try p.run("bundle", "validate", p.f(file), "--trust", p.f(app))
        }
        #expect(try p.sign("largest.fpbundle", sequence: 9_007_199_254_740_991).status == 0)
        try forgeText(p, "spelled.fpbundle") {
            $0.replacingOccurrences(of: "\"sequence\": 5,", with: "\"sequence\": 5.0,")
        }
        try forgeText(p, "future.fpbundle", signedAt: "2026-06-02T00:00:00Z")
        try forgeText(p, "expired.fpbundle", signedAt: "1970-01-01T00:00:00Z", expires: "1970-06-30T00:00:00Z")
        try forgeText(p, "inverted.fpbundle", expires: TrustTests.start)
        // A bundle and a root for "caf\u{e9}" (precomposed), a statement for "cafe\u{301}", properly signed.
        let source = p.f("cafe-source")
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: source)
        let manifest = source + "/bundle.json"
        try String(contentsOfFile: manifest, encoding: .utf8)
            .replacingOccurrences(of: #""app_id": "demo""#, with: "\"app_id\": \"\(Self.nfc)\"")
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(try fpctl("bundle", "build", source, "-o", p.f("cafe.fpbundle")).status == 0)
        try p.ok("trust", "init", "-o", p.f("nfc.json"), "--app-id", Self.nfc, "--root-key", p.f("r1.key"))
        try p.ok("trust", "delegate", p.f("nfc.json"), "--root-key", p.f("r1.key"), "--public-key", p.f("ci.pub"))
        try forgeText(p, "cafe-good.fpbundle", bundle: p.f("cafe.fpbundle"), trust: "nfc.json")
        try forgeText(p, "cafe-nfd.fpbundle", bundle: p.f("cafe.fpbundle"), trust: "nfc.json", appID: Self.nfd)
        let cases: [(String, String?)] = [
            ("largest.fpbundle", nil), ("spelled.fpbundle", "signature-invalid"),
            ("future.fpbundle", "signature-future"),
            ("expired.fpbundle", "signature-expired"), ("inverted.fpbundle", "signature-invalid"),
            ("cafe-good.fpbundle", nil), ("cafe-nfd.fpbundle", "signature-wrong-app"),
        ]
        for (file, rule) in cases {
            let fpctl = try validate(file)
            let independent = try verifier(file)
            if let rule {
                #expect(fpctl.status == 65 && fpctl.stdout.contains(rule), "\(file): \(fpctl.stdout)")
                #expect(independent.status == 1, "\(file): \(independent.stdout)\(independent.stderr)")
            } else {
                #expect(fpctl.status == 0, "\(file): \(fpctl.stdout)")
                #expect(independent.status == 0, "\(file): \(independent.stdout)\(independent.stderr)")
            }
        }
    }

    @Test(
        "fpctl-bundle(5)'s limits: file sizes, 1,000 versions, an app copy from version 2, an expiry instant, a key id's case"
    )
    func trustLimits() throws {
        let p = try TrustTests.Pipeline()
        // trust.json one byte over its limit, a key file one byte over its own: input-size, 65, one line.
        let big = p.f("big.json")
        try Data(repeating: 0x20, count: TrustFile.maxFileBytes + 1).write(to: URL(fileURLWithPath: big))
        let show = try p.run("trust", "show", big)
        #expect(
            show.status == 65 && show.stderr.contains("larger than \(TrustFile.maxFileBytes) bytes"), "\(show.stderr)")
        let bigKey = p.f("big.key")
        try Data(repeating: 0x20, count: SigningKey.maxFileBytes + 1).write(to: URL(fileURLWithPath: bigKey))
        chmod(bigKey, 0o600)
        let sign = try p.run("bundle", "sign", p.bundle, "--key", bigKey, "-o", p.f("never.fpbundle"))
        #expect(
            sign.status == 65 && sign.stderr.contains("larger than \(SigningKey.maxFileBytes) bytes"), "\(sign.stderr)")
        #expect(!FileManager.default.fileExists(atPath: p.f("never.fpbundle")))
        // 1,001 versions: refused, naming the limit.
        let trust = try p.trust()
        let many = TrustFile(roots: Array(repeating: trust.roots[0], count: TrustFile.maxVersions + 1))
        try many.data.write(to: URL(fileURLWithPath: p.f("many.json")))
        let tooMany = try p.run("trust", "show", p.f("many.json"))
        #expect(
            tooMany.status == 65 && tooMany.stderr.contains("a list of 1 to 1000 root versions"), "\(tooMany.stderr)")
        // An app copy that starts at version 2 is trusted as it stands.
        try TrustFile(roots: [trust.roots[1]]).data.write(to: URL(fileURLWithPath: p.f("from2.json")))
        #expect(try p.sign("s.fpbundle", sequence: 3, extra: ["--expires", "30d"]).status == 0)
        let from2 = try p.run("bundle", "validate", p.f("s.fpbundle"), "--trust", p.f("from2.json"))
        #expect(from2.status == 0, "\(from2.stdout)")
        // The signature expires 30 days after 2026-06-01: valid at that instant, expired one second later.
        #expect(try p.validate("s.fpbundle", now: "2026-07-01T00:00:00Z").status == 0)
        let after = try p.validate("s.fpbundle", now: "2026-07-01T00:00:01Z")
        #expect(after.status == 65 && after.stdout.contains("signature-expired"), "\(after.stdout)")
        // An upper-case key id is not a key id: signature-invalid, not signature-unknown-key.
        let id = try p.key("ci").keyID
        try forgeText(p, "upper.fpbundle") { $0.replacingOccurrences(of: id, with: id.uppercased()) }
        let upper = try p.validate("upper.fpbundle")
        #expect(upper.status == 65 && upper.stdout.contains("signature-invalid"), "\(upper.stdout)")
        #expect(!upper.stdout.contains("signature-unknown-key"))
        // --trust with --public-key: a usage error.
        let both = try p.run(
            "bundle", "validate", p.f("s.fpbundle"), "--trust", p.f("app.json"), "--public-key", p.f("ci.pub"))
        #expect(both.status == 64, "\(both.stderr)")
    }

    @Test("an identities file with a precomposed and a decomposed user warms two identities, two entries")
    func identitiesFile() throws {
        let tmp = try TemporaryDirectory()
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let ids = tmp.file("ids.jsonl")
        try "{\"user_id\":\"\(Self.nfc)\"}\n{\"user_id\":\"\(Self.nfd)\"}\n".write(
            toFile: ids, atomically: true, encoding: .utf8)
        let cache = tmp.file("cache")
        let warm = try fpctl(
            "warm", "paywall", "--api-url", server.url, "--app-id", "demo", "--identities", ids, "--cache-dir", cache,
            "--media", "none", "--format", "csv")
        #expect(warm.status == 0, "\(warm.stderr)")
        #expect(warm.stdout.split(separator: "\n").filter { $0.contains(",warmed,") }.count == 2, "\(warm.stdout)")
        let list = try fpctl("cache", "list", "--cache-dir", cache, "--format", "csv")
        let rows = list.stdout.split(separator: "\n").dropFirst()
        #expect(rows.count == 2, "\(list.stdout)")
        #expect(Set(rows.map { $0.split(separator: ",")[2] }).count == 2, "two fingerprints")
    }

    @Test(
        "bundle build of a flow using two image urls and two fonts that differ only in their bytes: both in the manifest, each its own file, and validate agrees"
    )
    func bundleMediaAsBytes() throws {
        let tmp = try TemporaryDirectory()
        let source = tmp.file("src")
        let travel = Paths.sample("travel")
        try FileManager.default.createDirectory(atPath: source + "/flows", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: travel + "/assets", toPath: source + "/assets")
        let (nfc, nfd) = (Self.nfc, Self.nfd)
        let image = { (name: String) in "https://media.example.org/\(name).png" }
        let font = { (name: String) in "https://media.example.org/fonts/\(name).ttf" }
        let flow = """
            {"schema_version": 1, "id": "f", "version": "v",
             "fonts": [{"name": "\(nfc)", "url": "\(font(nfc))"}, {"name": "\(nfd)", "url": "\(font(nfd))"}],
             "screens": [{"id": "a", "components": [
               {"type": "image", "src": "\(image(nfc))"}, {"type": "image", "src": "\(image(nfd))"},
               {"type": "text", "text": "t", "font": "\(nfc)"}, {"type": "text", "text": "t", "font": "\(nfd)"}]}]}
            """
        try flow.write(toFile: source + "/flows/p.json", atomically: true, encoding: .utf8)
        let bundleJSON = """
            {"app_id": "travel", "created_at": "2026-11-01T09:30:00Z", "placements": {"p": "flows/p.json"},
             "assets": {"\(image(nfc))": "assets/map.png", "\(image(nfd))": "assets/plane.png",
                        "\(font(nfc))": "assets/DejaVuSerif.ttf", "\(font(nfd))": "assets/DejaVuSerif.ttf"}}
            """
        try bundleJSON.write(toFile: source + "/bundle.json", atomically: true, encoding: .utf8)
        let build = try fpctl("bundle", "build", source, "-o", tmp.file("b.fpbundle"))
        #expect(build.status == 0, "\(build.stderr)")
        let validate = try fpctl("bundle", "validate", tmp.file("b.fpbundle"))
        #expect(validate.status == 0, "\(validate.stdout)\(validate.stderr)")
        let extract = try fpctl("bundle", "extract", tmp.file("b.fpbundle"), "-o", tmp.file("out"))
        #expect(extract.status == 0, "\(extract.stderr)")
        let manifest = try JSONValue.parse(try Data(contentsOf: URL(fileURLWithPath: tmp.file("out/manifest.json"))))
        let media = try #require(manifest["media"]?.objectValue)
        let fonts = try #require(manifest["fonts"]?.objectValue)
        #expect(media.count == 2 && fonts.count == 2, "\(media.keys) \(fonts.keys)")
        let (pre, de) = (media[ExactName(image(nfc))]?.stringValue, media[ExactName(image(nfd))]?.stringValue)
        #expect(pre != nil && de != nil && pre != de, "two images, two files: the map and the plane")
        #expect(fonts[ExactName(nfc)] != nil && fonts[ExactName(nfd)] != nil)
    }

    @Test("bundle.json with a placement key in both spellings: refused with a finding for each, no crash, no bundle")
    func placementKeysAsBytes() throws {
        let tmp = try TemporaryDirectory()
        let source = tmp.file("src")
        try FileManager.default.createDirectory(atPath: source + "/flows", withIntermediateDirectories: true)
        let flow = #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a","components":[]}]}"#
        try flow.write(toFile: source + "/flows/a.json", atomically: true, encoding: .utf8)
        let bundleJSON = """
            {"app_id": "demo", "created_at": "2026-11-01T09:30:00Z",
             "placements": {"\(Self.nfc)": "flows/a.json", "\(Self.nfd)": "flows/a.json"}}
            """
        try bundleJSON.write(toFile: source + "/bundle.json", atomically: true, encoding: .utf8)
        let build = try fpctl("bundle", "build", source, "-o", tmp.file("b.fpbundle"))
        #expect(build.status != 0 && build.status < 128, "refused, not crashed: \(build.status) \(build.stderr)")
        #expect(build.stderr.components(separatedBy: "source-placement-key").count - 1 == 2, "\(build.stderr)")
        #expect(!FileManager.default.fileExists(atPath: tmp.file("b.fpbundle")))
    }

    @Test("rules.json with a placement in both spellings: serve refuses to start (65), naming the second in byte order")
    func rulesPlacementsAsBytes() throws {
        let tmp = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Paths.sample("travel"), toPath: tmp.file("travel"))
        let rules = #"{"placements":{"\#(Self.nfc)":[{"flow":"trip-upsell"}],"\#(Self.nfd)":[{"flow":"welcome"}]}}"#
        try rules.write(toFile: tmp.file("travel/rules.json"), atomically: true, encoding: .utf8)
        let refused = try fpctl("serve", tmp.file("travel"), "--port", "0")
        #expect(refused.status == 65, "\(refused.stderr)")
        // "cafe" + U+0301 (65 cc 81) sorts before "caf" + U+00E9 (c3 a9): the precomposed one is named.
        #expect(
            refused.stderr.contains("rules-invalid: \(tmp.file("travel/rules.json"))#/placements/\(Self.nfc): "),
            "\(refused.stderr)")
    }

    @Test("warm of a precomposed and a decomposed placement warms both: two outcomes an identity, not one")
    func twoPlacements() throws {
        let tmp = try TemporaryDirectory()
        let server = try ServeProcess([Paths.sample("demo"), "-q"])
        let warm = try fpctl(
            "warm", Self.nfc, Self.nfd, "paywall", "--api-url", server.url, "--app-id", "demo", "--user-id", "u-1",
            "--cache-dir", tmp.file("cache"), "--media", "none", "--format", "csv")
        let rows = warm.stdout.split(separator: "\n").dropFirst().map {
            $0.split(separator: ",", omittingEmptySubsequences: false)
        }
        let placements = rows.compactMap { $0.first(where: { $0.contains("caf") }) }.map(String.init)
        #expect(placements.count == 2, "\(warm.stdout) \(warm.stderr)")
        #expect(
            placements.contains { $0.sameBytes(as: Self.nfc) } && placements.contains { $0.sameBytes(as: Self.nfd) })
        #expect(rows.count == 3, "paywall too")
    }

    @Test("a content hash covers the backend's digits: fpctl's equals Python's over the same flow")
    func contentHashDigits() throws {
        let text =
            #"{"id":"f","n":[1234567890123456789,9007199254740993,-9223372036854775808,0.5,1e21],"caf\#u{e9}":"x"}"#
        let script = """
            import hashlib, json, sys
            v = json.loads(sys.argv[1])
            print("sha256:" + hashlib.sha256(json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest())
            """
        // Python writes 1e21 as 1e+21 and 0.5 as 0.5, as canonical JSON does.
        let python = try run(try tool("python3"), ["-c", script, text])
        #expect(python.status == 0, "\(python.stderr)")
        let ours = FlowDocument.computeContentHash(try JSONValue.parse(Data(text.utf8)))
        #expect(python.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == ours)
    }
}
