import FlowPilotCore
import Foundation
import Testing

/// The JSON Schemas of a flow and of bundle.json (`fpctl bundle schema`,
/// schemas/), checked by check-jsonschema against the draft 2020-12
/// metaschema, against the samples, and against `bundle validate` field by
/// field: the schema and fpctl's rules cannot disagree about a type.
@Suite("JSON Schemas of a flow and of bundle.json")
struct BundleSchemaTests {
    static let schemas = Paths.packageRoot.appendingPathComponent("schemas").path

    /// A flow with every field the flow schema documents, valid, its media
    /// and font those the demo sample has local copies of.
    static let fullFlow = #"""
        {
          "schema_version": 1,
          "id": "flow_full",
          "version": "ver_1",
          "screens": [
            {
              "id": "offer",
              "components": [
                { "type": "image", "src": "https://cdn.example.com/demo/logo.png" },
                { "type": "text", "text": "Go Pro", "font": "DejaVuSans-Bold" },
                { "type": "stack", "children": [
                  { "type": "button", "text": "Buy", "action": { "type": "purchase", "product_id": "pro" } },
                  { "type": "button", "text": "Next", "action": { "type": "navigate", "screen": "thanks" } },
                  { "type": "button", "text": "Terms", "action": { "type": "open_link", "url": "https://example.com/t" } },
                  { "type": "button", "text": "Ask", "action": { "type": "call_delegate", "message": "m", "payload": { "k": 1 } } },
                  { "type": "button", "text": "Restore", "action": { "type": "restore" } },
                  { "type": "button", "text": "Close", "action": { "type": "dismiss" } }
                ] },
                { "type": "lottie", "src": "https://cdn.example.com/p/confetti.json" },
                { "type": "video", "src": "https://cdn.example.com/p/intro.mp4" },
                { "type": "spacer" }
              ]
            },
            { "id": "thanks", "components": [ { "type": "text", "text": "Thanks" } ] }
          ],
          "persistent_zones": {
            "navigation_bar": [ { "type": "image", "src": "https://cdn.example.com/demo/badge.png" } ],
            "footer": [],
            "overlay": []
          },
          "fonts": [
            {
              "name": "DejaVuSans-Bold",
              "url": "https://cdn.example.com/fonts/DejaVuSans-Bold.ttf",
              "sha256": "4dc44be9ffee351471ec5f19d93de2e84aa5838da663381d9eb7c125042bfcf9"
            }
          ],
          "experiment": { "id": "exp_price", "variant": "b" }
        }
        """#

    func checkJSONSchema(_ arguments: [String]) throws -> ProcessResult {
        try run(try tool("check-jsonschema"), arguments)
    }

    @Test("schemas/ holds what fpctl bundle schema prints, and both are valid draft 2020-12 schemas")
    func committedAndValid() throws {
        for kind in ["flow", "bundle"] {
            let printed = try fpctl("bundle", "schema", kind)
            #expect(printed.status == 0)
            let committed = try String(contentsOfFile: "\(Self.schemas)/\(kind).schema.json", encoding: .utf8)
            #expect(printed.stdout == committed, "schemas/\(kind).schema.json differs: run Scripts/update-schemas.sh")
            let schema = try #require(
                try JSONSerialization.jsonObject(with: Data(committed.utf8)) as? [String: Any])
            #expect(schema["$schema"] as? String == "https://json-schema.org/draft/2020-12/schema")
            #expect((schema["$id"] as? String)?.isEmpty == false && (schema["title"] as? String)?.isEmpty == false)
        }
        let meta = try checkJSONSchema(
            ["--check-metaschema", "\(Self.schemas)/flow.schema.json", "\(Self.schemas)/bundle.schema.json"])
        #expect(meta.status == 0, "\(meta.stdout)\(meta.stderr)")
        #expect(try fpctl("bundle", "schema", "xml").status == 64)
    }

    @Test("every sample flow and bundle.json passes its schema; the three-mistake flow's type mistake does not")
    func samples() throws {
        let root = Paths.packageRoot.appendingPathComponent("bundles").path
        let samples = try FileManager.default.contentsOfDirectory(atPath: root).filter {
            FileManager.default.fileExists(atPath: "\(root)/\($0)/bundle.json")
        }
        #expect(samples.count >= 2)
        var flows: [String] = []
        for sample in samples {
            let dir = "\(root)/\(sample)/flows"
            flows += try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".json") }.map {
                "\(dir)/\($0)"
            }
        }
        let accepted = try checkJSONSchema(["--schemafile", "\(Self.schemas)/flow.schema.json"] + flows)
        #expect(accepted.status == 0, "\(accepted.stdout)\(accepted.stderr)")
        let manifests = try checkJSONSchema(
            ["--schemafile", "\(Self.schemas)/bundle.schema.json"] + samples.map { "\(root)/\($0)/bundle.json" })
        #expect(manifests.status == 0, "\(manifests.stdout)\(manifests.stderr)")
        let (dir, _) = try FindingsFormatTests.threeMistakes()
        let refused = try checkJSONSchema(
            ["--schemafile", "\(Self.schemas)/flow.schema.json", dir.file("src/flows/onboarding.json")])
        #expect(refused.status == 1)
        #expect(
            refused.stdout.contains("$.screens[0].components[1].text: 42 is not of type 'string'"), "\(refused.stdout)")
    }

    @Test("docs/ci.md's pre-commit hooks pass on this repository's samples, and its VS Code globs find them")
    func editorAndHookDocs() throws {
        // The last yaml block is the pre-commit configuration, the json block VS Code's settings.
        let script = #"""
            import fnmatch, json, re, subprocess, sys, glob
            from ruamel.yaml import YAML
            doc = open("docs/ci.md").read()
            hooks = YAML(typ="safe").load(doc.split("```yaml\n")[-1].split("```")[0])["repos"][0]["hooks"]
            files = sorted(glob.glob("bundles/**/*.json", recursive=True))
            out = {"hooks": [], "globs": []}
            for hook in hooks:
                matched = [f for f in files if re.search(hook["files"], f)]
                r = subprocess.run([sys.argv[1]] + hook["args"] + matched, capture_output=True, text=True)
                out["hooks"].append({"name": hook["name"], "matched": len(matched), "status": r.returncode,
                                     "output": r.stdout + r.stderr})
            settings = json.loads(doc.split("```json\n")[1].split("```")[0])
            for mapping in settings["json.schemas"]:
                for pattern in mapping["fileMatch"]:
                    out["globs"].append({"pattern": pattern, "matched": len(fnmatch.filter(files, pattern)),
                                         "schema": mapping["url"]})
            print(json.dumps(out))
            """#
        let r = try run(
            try tool("python3"), ["-c", script, try tool("check-jsonschema")], currentDirectory: Paths.packageRoot.path)
        #expect(r.status == 0, "\(r.stderr)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let hooks = try #require(out["hooks"] as? [[String: Any]])
        #expect(hooks.map { $0["name"] as? String } == ["flows", "bundle.json"])
        for hook in hooks {
            #expect((hook["matched"] as? Int ?? 0) >= 2, "\(hook)")
            #expect(hook["status"] as? Int == 0, "\(hook)")
        }
        let globs = try #require(out["globs"] as? [[String: Any]])
        #expect(globs.count == 2)
        for glob in globs {
            #expect((glob["matched"] as? Int ?? 0) >= 2, "\(glob)")
            let schema = try #require(glob["schema"] as? String)
            #expect(FileManager.default.fileExists(atPath: Paths.packageRoot.appendingPathComponent(schema).path))
        }
    }

    @Test(
        "each field of bundle.json, given a value of the wrong type, is refused by both the schema and bundle validate")
    func everyManifestFieldInBoth() throws {
        let demo = Paths.sample("demo")
        let original = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(demo)/bundle.json")))
                as? [String: Any])
        var full = original
        full["created_at"] = "2026-01-01T00:00:00Z"
        let url = "https://cdn.example.com/demo/logo.png"
        let mutations: [(String, (inout [String: Any]) -> Void)] = [
            ("/app_id", { $0["app_id"] = 42 }),
            ("/created_at", { $0["created_at"] = 42 }),
            ("/placements", { $0["placements"] = "flows/onboarding.json" }),
            ("/assets", { $0["assets"] = ["not an object"] }),
            (
                "/placements/onboarding",
                { m in
                    var placements = m["placements"] as? [String: Any] ?? [:]
                    placements["onboarding"] = 42
                    m["placements"] = placements
                }
            ),
            (
                "/assets/\(url)",
                { m in
                    var assets = m["assets"] as? [String: Any] ?? [:]
                    assets[url] = ["assets/logo.png"]
                    m["assets"] = assets
                }
            ),
        ]
        let dir = try TemporaryDirectory()
        // The full manifest first: both accept it.
        for (i, (pointer, mutate)) in ([("", { (_: inout [String: Any]) in })] + mutations).enumerated() {
            let source = dir.file("s\(i)")
            try FileManager.default.copyItem(atPath: demo, toPath: source)
            var manifest = full
            mutate(&manifest)
            try JSONSerialization.data(withJSONObject: manifest).write(
                to: URL(fileURLWithPath: "\(source)/bundle.json"))
            let validated = try fpctl(["bundle", "validate", "--source", source])
            let checked = try checkJSONSchema([
                "--schemafile", "\(Self.schemas)/bundle.schema.json", "\(source)/bundle.json",
            ])
            if pointer.isEmpty {
                #expect(validated.status == 0 && checked.status == 0, "\(validated.stdout)\(checked.stdout)")
            } else {
                #expect(
                    validated.status == 65 && validated.stdout.contains("bundle.json"),
                    "bundle validate accepts a wrong type at \(pointer): \(validated.stdout)")
                #expect(checked.status == 1, "the schema accepts a wrong type at \(pointer)")
            }
        }
    }

    @Test(
        "fpctl and the schema agree on every flow of the fuzz corpus's hostile bundles, rules a schema cannot state aside"
    )
    func hostileCorpusAgreement() throws {
        // Each distinct flow in Fuzz/Corpus/bundle, as a placement of one source.
        let dir = try TemporaryDirectory()
        let script = #"""
            import glob, hashlib, json, os, sys, zipfile
            out, seen = sys.argv[2], {}
            os.makedirs(out + "/flows")
            for path in sorted(glob.glob(sys.argv[1] + "/*.fpbundle")):
                try:
                    archive = zipfile.ZipFile(path)
                    names = [n for n in archive.namelist() if n.startswith("flows/") and n.endswith(".json")]
                    for name in names:
                        data = archive.read(name)
                        key = hashlib.sha256(data).hexdigest()
                        if key not in seen:
                            seen[key] = "flows/f%d.json" % len(seen)
                            open(out + "/" + seen[key], "wb").write(data)
                except Exception:
                    continue
            json.dump({"app_id": "corpus", "placements": {v[6:-5]: v for v in seen.values()}}, open(out + "/bundle.json", "w"))
            print(len(seen))
            """#
        let corpus = Paths.packageRoot.appendingPathComponent("Fuzz/Corpus/bundle").path
        let made = try run(try tool("python3"), ["-c", script, corpus, dir.file("src")])
        #expect(made.status == 0, "\(made.stderr)")
        let count = Int(made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(count >= 7, "\(count) flows in the corpus")
        let files = (0..<count).map { "flows/f\($0).json" }

        let validated = try fpctl(
            ["bundle", "validate", "--source", "src", "--format", "json"], currentDirectory: dir.path)
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(validated.stdout.utf8)) as? [String: Any])
        let findings = try #require(((document["files"] as? [[String: Any]])?.first)?["findings"] as? [[String: Any]])
        // What a schema cannot say: references across the document (a navigate's target, a declared
        // font's name, unique screen ids), the content hash's value, and the source's files.
        func schemaCanSay(_ f: [String: Any]) -> Bool {
            let (rule, message) = (f["rule"] as? String ?? "", f["message"] as? String ?? "")
            if rule.hasPrefix("source-") || rule == "rule-not-run" { return false }
            if ["flow-navigate", "flow-duplicate-screen"].contains(rule) { return false }
            if rule == "flow-content-hash" { return message.contains("must be a string") }
            if rule == "flow-font-undeclared" { return message.hasPrefix("font must be a string") }
            return true
        }
        let fpctlRefused = Set(
            findings.filter { $0["severity"] as? String == "error" && schemaCanSay($0) }.compactMap {
                ($0["path"] as? String)?.split(separator: "#").first.map(String.init)
            })
        let checked = try checkJSONSchema(
            ["-o", "json", "--schemafile", "\(Self.schemas)/flow.schema.json"] + files.map { dir.file("src/\($0)") })
        let report = try #require(try JSONSerialization.jsonObject(with: Data(checked.stdout.utf8)) as? [String: Any])
        let refusedFiles =
            (report["errors"] as? [[String: Any]] ?? []).compactMap { $0["filename"] as? String }
            + (report["parse_errors"] as? [[String: Any]] ?? []).compactMap { $0["filename"] as? String }
        let schemaRefused = Set(refusedFiles.map { String($0.dropFirst(dir.file("src/").count)) })
        for file in files {
            let (byFpctl, bySchema) = (fpctlRefused.contains(file), schemaRefused.contains(file))
            #expect(
                byFpctl == bySchema,
                "\(file): fpctl \(byFpctl ? "refuses" : "accepts"), the schema \(bySchema ? "refuses" : "accepts")")
        }
        // The corpus holds both kinds: flows both accept and flows both refuse.
        #expect(!schemaRefused.isEmpty && schemaRefused.count < files.count, "\(schemaRefused.sorted())")
    }

    /// Every value of `json`, by its path: a pointer and the value.
    static func values(_ json: Any, _ pointer: String = "") -> [(String, Any)] {
        var out: [(String, Any)] = [(pointer, json)]
        if let object = json as? [String: Any] {
            for (key, value) in object { out += values(value, "\(pointer)/\(key)") }
        } else if let array = json as? [Any] {
            for (i, value) in array.enumerated() { out += values(value, "\(pointer)/\(i)") }
        }
        return out
    }

    /// `json` with the value at `pointer` replaced.
    static func replacing(_ json: Any, at pointer: ArraySlice<Substring>, with value: Any) -> Any {
        guard let key = pointer.first else { return value }
        if var object = json as? [String: Any] {
            object[String(key)] = replacing(object[String(key)] as Any, at: pointer.dropFirst(), with: value)
            return object
        }
        if var array = json as? [Any], let i = Int(key) {
            array[i] = replacing(array[i], at: pointer.dropFirst(), with: value)
            return array
        }
        return json
    }

    /// A value of another JSON type than `value`'s.
    static func wrongType(for value: Any) -> Any {
        switch value {
        case is String: 42
        case is [Any]: ["not": "an array"]
        case is [String: Any]: "not an object"
        default: "not a number"
        }
    }

    @Test("each field of a flow, given a value of the wrong type, is refused by both the schema and bundle validate")
    func everyFieldInBoth() throws {
        let flow = try #require(try JSONSerialization.jsonObject(with: Data(Self.fullFlow.utf8)) as? [String: Any])
        // The full flow holds every property the schema names.
        let schemaText = try String(contentsOfFile: "\(Self.schemas)/flow.schema.json", encoding: .utf8)
        let named = Set(schemaText.matches(of: /"properties": \{\s*"([a-z_]+)"/).map { String($0.1) })
            .union(schemaText.matches(of: /\n\s*"([a-z_]+)": \{\s*("\$ref"|"description")/).map { String($0.1) })
            .subtracting([
                "$defs", "properties", "if", "then", "screen", "components", "component", "action", "font", "httpURL",
                "items",
            ])
        let present = Set(Self.values(flow).compactMap { $0.0.split(separator: "/").last.map(String.init) })
        // content_hash is walked on its own below: a hash right for the full flow is wrong for every other.
        #expect(
            named.subtracting(present) == ["content_hash"],
            "fields the test flow lacks: \(named.subtracting(present).sorted())")

        // One placement per field: the full flow with that field's value of another type.
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.file("src/flows"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: Paths.sample("demo") + "/assets", toPath: dir.file("src/assets"))
        let fields = Self.values(flow).filter { !$0.0.isEmpty && !$0.0.contains("/payload") }
        var placements: [String: String] = ["full": "flows/full.json"]
        try Data(Self.fullFlow.utf8).write(to: URL(fileURLWithPath: dir.file("src/flows/full.json")))
        var pointers: [String: String] = [:]
        for (i, field) in fields.enumerated() {
            let mutated = Self.replacing(
                flow, at: field.0.split(separator: "/")[...], with: Self.wrongType(for: field.1))
            let data = try JSONSerialization.data(withJSONObject: mutated, options: [.sortedKeys])
            try data.write(to: URL(fileURLWithPath: dir.file("src/flows/m\(i).json")))
            placements["m\(i)"] = "flows/m\(i).json"
            pointers["flows/m\(i).json"] = field.0
        }
        var hashed = flow
        hashed["content_hash"] = 42
        try JSONSerialization.data(withJSONObject: hashed).write(
            to: URL(fileURLWithPath: dir.file("src/flows/hash.json")))
        placements["hash"] = "flows/hash.json"
        pointers["flows/hash.json"] = "/content_hash"
        let manifest: [String: Any] = [
            "app_id": "schema-walk", "placements": placements,
            "assets": [
                "https://cdn.example.com/demo/logo.png": "assets/logo.png",
                "https://cdn.example.com/demo/badge.png": "assets/badge.png",
                "https://cdn.example.com/fonts/DejaVuSans-Bold.ttf": "assets/DejaVuSans-Bold.ttf",
            ],
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(
            to: URL(fileURLWithPath: dir.file("src/bundle.json")))

        // fpctl: which flows have an error.
        let validated = try fpctl(
            ["bundle", "validate", "--source", "src", "--format", "json"], currentDirectory: dir.path)
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(validated.stdout.utf8)) as? [String: Any])
        let findings = try #require(((document["files"] as? [[String: Any]])?.first)?["findings"] as? [[String: Any]])
        let fpctlRefused = Set(
            findings.filter { $0["severity"] as? String == "error" }.compactMap {
                ($0["path"] as? String)?.split(separator: "#").first.map(String.init)
            })
        // The schema: which flows fail it.
        let files = placements.values.sorted().map { dir.file("src/\($0)") }
        let checked = try checkJSONSchema(["-o", "json", "--schemafile", "\(Self.schemas)/flow.schema.json"] + files)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(checked.stdout.utf8)) as? [String: Any])
        let schemaRefused = Set(
            (report["errors"] as? [[String: Any]] ?? []).compactMap { ($0["filename"] as? String) }.map {
                String($0.dropFirst(dir.file("src/").count))
            })
        #expect(!fpctlRefused.contains("flows/full.json") && !schemaRefused.contains("flows/full.json"))
        for (file, pointer) in pointers.sorted(by: { $0.key < $1.key }) {
            let (byFpctl, bySchema) = (fpctlRefused.contains(file), schemaRefused.contains(file))
            #expect(byFpctl, "bundle validate accepts a wrong type at \(pointer)")
            #expect(bySchema, "the schema accepts a wrong type at \(pointer)")
        }
        #expect(fields.count > 60, "\(fields.count) fields walked")
    }
}
