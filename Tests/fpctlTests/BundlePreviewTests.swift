import Foundation
import Testing

/// `bundle preview` as release managers see it: the page opened in a real,
/// headless chromium with no network, read back as its DOM and as a screenshot.
@Suite("bundle preview in a real browser")
struct BundlePreviewTests {
    let tmp: TemporaryDirectory
    let browser: Browser

    init() throws {
        tmp = try TemporaryDirectory()
        browser = try Browser()
    }

    /// What a flow says that a person reads: screen ids and every text and button label.
    static func strings(ofFlow path: String) throws -> (screens: [String], texts: [String]) {
        let flow = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        var texts: [String] = []
        func walk(_ value: Any) {
            if let object = value as? [String: Any] {
                if let text = object["text"] as? String { texts.append(text) }
                object.values.forEach(walk)
            } else if let array = value as? [Any] {
                array.forEach(walk)
            }
        }
        walk(flow["screens"] ?? [])
        walk(flow["persistent_zones"] ?? [:])
        let screens = (flow["screens"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        return (screens, texts)
    }

    /// A string as chromium serializes it in a text node.
    static func serialized(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    func preview(_ arguments: [String], to name: String) throws -> String {
        let page = tmp.file(name)
        let result = try fpctl(["bundle", "preview"] + arguments + ["-o", page])
        #expect(result.status == 0, "bundle preview: \(result.stderr)")
        return page
    }

    @Test(
        "every placement, screen id and text of the demo and travel flows is in the rendered DOM",
        arguments: ["demo", "travel"])
    func everythingIsOnThePage(_ sample: String) throws {
        let page = try preview([try tmp.buildSample(sample)], to: "\(sample).html")
        let dom = try browser.dumpDOM(page)
        let source = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: "\(Paths.sample(sample))/bundle.json"))) as? [String: Any])
        let placements = try #require(source["placements"] as? [String: String])
        var screenCount = 0
        for (placement, flowPath) in placements {
            #expect(dom.contains("<h2>\(placement)</h2>"), "placement \(placement) has no section")
            let (screens, texts) = try Self.strings(ofFlow: "\(Paths.sample(sample))/\(flowPath)")
            screenCount += screens.count
            for screen in screens {
                #expect(dom.contains("<figcaption>\(Self.serialized(screen))</figcaption>"), "screen \(screen)")
            }
            for text in texts { #expect(dom.contains(Self.serialized(text)), "text \(text.debugDescription)") }
        }
        #expect(dom.components(separatedBy: "<figure class=\"phone\"").count - 1 == screenCount)
        #expect(!dom.contains("<script"))
        #expect(dom.contains("valid: no findings"))
    }

    @Test(
        "a screenshot of the demo and travel pages is not blank and shows every image of the bundle",
        arguments: ["demo", "travel"])
    func screenshotShowsTheImages(_ sample: String) throws {
        let page = try preview([try tmp.buildSample(sample)], to: "\(sample).html")
        let png = tmp.file("\(sample).png")
        try browser.screenshot(page, to: png, width: 1600, height: 3600)
        let images = try FileManager.default.contentsOfDirectory(atPath: "\(Paths.sample(sample))/assets")
            .filter { $0.hasSuffix(".png") }.sorted().map { "\(Paths.sample(sample))/assets/\($0)" }
        #expect(images.count >= 3)
        let stat = try run(try tool("python3"), [Self.pngstat, png] + images)
        #expect(stat.status == 0, "\(stat.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(stat.stdout.utf8)) as? [String: Any])
        #expect(report["width"] as? Int == 1600)
        #expect((report["distinct"] as? Int ?? 0) > 500, "the screenshot is nearly blank: \(report)")
        let found = try #require(report["images"] as? [String: [Int]])
        for image in images {
            let counts = try #require(found[image])
            // Every marker pixel of the image, at least once: the image is drawn, whole, at its size.
            #expect(counts[0] > 0 && counts[1] >= counts[0], "\(image) is not on the screenshot: \(counts)")
        }
    }

    static let payload = #"<img src=x onerror="document.title='pwned'"><script>document.title='pwned'</script>"#

    /// The demo source with a `hostile` placement whose every string is markup.
    func hostileSource() throws -> String {
        let source = tmp.file("hostile-src")
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: source)
        let flow: [String: Any] = [
            "schema_version": 1, "id": "flow_<b>x</b>", "version": #"ver_"'><script>"#,
            "screens": [
                [
                    "id": "<script>s</script>",
                    "components": [
                        ["type": "text", "text": Self.payload],
                        [
                            "type": "button", "text": Self.payload,
                            "action": ["type": "open_link", "url": "https://evil.example/?q=\"><script>x</script>"],
                        ],
                        [
                            "type": "button", "text": "again",
                            "action": ["type": "navigate", "screen": "<script>s</script>"],
                        ],
                        [
                            "type": "button", "text": "call",
                            "action": [
                                "type": "call_delegate", "message": "</style><script>document.title='pwned'</script>",
                            ],
                        ],
                        ["type": "image", "src": "https://cdn.example.com/demo/logo.png"],
                    ],
                ]
            ],
            "experiment": ["id": "</title><script>", "variant": "\" onmouseover=\""],
        ]
        try JSONSerialization.data(withJSONObject: flow).write(to: URL(fileURLWithPath: "\(source)/flows/hostile.json"))
        let manifestURL = URL(fileURLWithPath: "\(source)/bundle.json")
        var manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: manifestURL)) as? [String: Any])
        var placements = try #require(manifest["placements"] as? [String: String])
        placements["hostile"] = "flows/hostile.json"
        manifest["placements"] = placements
        try JSONSerialization.data(withJSONObject: manifest).write(to: manifestURL)
        return source
    }

    @Test("a flow whose strings are markup renders them literally and runs nothing")
    func hostileTextStaysText() throws {
        let bundle = tmp.file("hostile.fpbundle")
        let build = try fpctl("bundle", "build", try hostileSource(), "-o", bundle)
        #expect(build.status == 0, "\(build.stderr)")
        let page = try preview([bundle], to: "hostile.html")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        // By construction: no script, no live link, nothing to fetch.
        #expect(!html.lowercased().contains("<script"))
        // No element with a source: every `<` of a flow's text is escaped.
        #expect(html.range(of: #"<[a-zA-Z][^>]*\ssrc="#, options: .regularExpression) == nil)
        for link in html.components(separatedBy: "href=\"").dropFirst() {
            #expect(link.hasPrefix("#"), "a live link: \(link.prefix(60))")
        }
        for use in html.components(separatedBy: "url(").dropFirst() {
            #expect(use.hasPrefix("\"data:"), "a URL: \(use.prefix(60))")
        }
        #expect(
            html.contains(
                #"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; font-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'">"#
            ))
        let dom = try browser.dumpDOM(page)
        #expect(dom.contains("<title>fpctl bundle preview: demo</title>"), "the page's title changed: a script ran")
        #expect(!dom.contains("pwned</title>"))
        #expect(!dom.contains("<script") && !dom.contains("<img"))
        #expect(dom.contains(Self.serialized(Self.payload)))
        #expect(dom.contains("<figcaption>&lt;script&gt;s&lt;/script&gt;</figcaption>"))
        #expect(dom.contains("open_link https://evil.example/?q=\"&gt;&lt;script&gt;x&lt;/script&gt;"))
        #expect(dom.contains(##"<a class="button" href="#p0-s0">again"##), "navigate links to its screen's frame")
    }

    @Test("two bundles side by side: the changed placement first and marked, an added one marked, the same one last")
    func comparisonMarksChanges() throws {
        let old = try tmp.buildSample("demo")
        let source = tmp.file("demo-next")
        try FileManager.default.copyItem(atPath: Paths.sample("demo"), toPath: source)
        let paywallURL = URL(fileURLWithPath: "\(source)/flows/paywall.json")
        var paywall = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: paywallURL)) as? [String: Any])
        paywall["version"] = "ver_pw_9"
        paywall["content_hash"] = nil
        try JSONSerialization.data(withJSONObject: paywall).write(to: paywallURL)
        let manifestURL = URL(fileURLWithPath: "\(source)/bundle.json")
        var manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: manifestURL)) as? [String: Any])
        manifest["placements"] = [
            "onboarding": "flows/onboarding.json", "paywall": "flows/paywall.json", "extra": "flows/onboarding.json",
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: manifestURL)
        let new = tmp.file("next.fpbundle")
        #expect(try fpctl("bundle", "build", source, "-o", new).status == 0)

        let dom = try browser.dumpDOM(try preview([old, new], to: "compare.html"))
        let sections = dom.components(separatedBy: "<section class=\"placement ").dropFirst().map { $0.prefix(120) }
        #expect(sections.count == 3)
        #expect(
            sections.first?.hasPrefix(
                #"change-changed" id="p0">"# + "\n" + #"<h2>paywall <span class="badge changed">changed</span></h2>"#)
                == true, "\(sections)")
        #expect(sections.dropFirst().first?.contains(#"<h2>extra <span class="badge added">added</span>"#) == true)
        #expect(sections.last?.contains(#"<h2>onboarding <span class="badge same">same</span>"#) == true)
        #expect(dom.contains("ver_pw_8") && dom.contains("ver_pw_9"))
        #expect(dom.contains("not in the old bundle"))

        let reverse = try browser.dumpDOM(try preview([new, old], to: "reverse.html"))
        #expect(reverse.contains(#"<h2>extra <span class="badge removed">removed</span>"#))
    }

    @Test("the same bundle gives the same bytes, and each image and font is in the page once")
    func deterministicAndOnce() throws {
        let demo = try tmp.buildSample("demo")
        let first = try Data(contentsOf: URL(fileURLWithPath: try preview([demo], to: "a.html")))
        let second = try Data(contentsOf: URL(fileURLWithPath: try preview([demo], to: "b.html")))
        #expect(first == second)
        let both = try String(contentsOfFile: try preview([demo, demo], to: "both.html"), encoding: .utf8)
        let single = String(decoding: first, as: UTF8.self)
        let assets = try FileManager.default.contentsOfDirectory(atPath: "\(Paths.sample("demo"))/assets")
        #expect(assets.count == 7)
        for asset in assets {
            let base64 = try Data(contentsOf: URL(fileURLWithPath: "\(Paths.sample("demo"))/assets/\(asset)"))
                .base64EncodedString()
            #expect(single.components(separatedBy: base64).count - 1 == 1, "\(asset) in the page")
            #expect(both.components(separatedBy: base64).count - 1 == 1, "\(asset) in the side-by-side page")
        }
    }

    static let pngstat = Paths.packageRoot.appendingPathComponent("Tests/browser/pngstat.py").path
}
