import Foundation
import Testing

@testable import FlowPilotCore

private func sampleFlow(_ bundle: String, _ name: String) throws -> Data {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return try Data(contentsOf: url.appendingPathComponent("bundles/\(bundle)/flows/\(name).json"))
}

private func validate(_ json: String) -> (FlowDocument?, [Finding]) {
    FlowDocument.validate(data: Data(json.utf8), location: "f.json")
}

private let minimal = #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a","components":[]}]}"#

@Suite("flow documents: schema v1 rules and media sets")
struct FlowDocumentTests {
    @Test(
        "screen ids, navigate targets, font names and image urls are their bytes: a precomposed and a decomposed one are two"
    )
    func idsAsBytes() throws {
        let (pre, de) = ("caf\u{E9}", "cafe\u{301}")  // "café" twice: equal as Swift Strings, not as bytes
        #expect(pre == de && !pre.sameBytes(as: de))
        func flow(
            screens: [String], navigate: String? = nil, declared: [String] = [], used: String? = nil,
            images: [String] = []
        ) -> String {
            var first: [String] = images.map { #"{"type":"image","src":"https://img.example/\#($0).png"}"# }
            if let navigate { first.append(#"{"type":"button","action":{"type":"navigate","screen":"\#(navigate)"}}"#) }
            if let used { first.append(#"{"type":"text","text":"t","font":"\#(used)"}"#) }
            let list = screens.enumerated().map { i, id in
                #"{"id":"\#(id)","components":[\#(i == 0 ? first.joined(separator: ",") : "")]}"#
            }
            let fonts = declared.map { #"{"name":"\#($0)","url":"https://fonts.example/\#($0).ttf"}"# }
            return
                #"{"schema_version":1,"id":"f","version":"v","fonts":[\#(fonts.joined(separator: ","))],"screens":[\#(list.joined(separator: ","))]}"#
        }
        // Two screens whose ids differ in their bytes are two screens, not a duplicate.
        let (two, twoFindings) = validate(flow(screens: [pre, de]))
        #expect(two != nil && twoFindings.isEmpty, "\(twoFindings.map(\.line))")
        // A navigate to the decomposed id finds no screen when only the precomposed one exists:
        // the SDK compares the bytes, so the button would lead nowhere.
        let (_, navFindings) = validate(flow(screens: [pre, "b"], navigate: de))
        #expect(navFindings.map(\.rule) == ["flow-navigate"], "\(navFindings.map(\.line))")
        #expect(validate(flow(screens: [pre, "b"], navigate: pre)).1.isEmpty)
        // The preview draws the same: that button leads nowhere, the other to the first screen.
        for (target, index) in [(de, nil), (pre, 0)] as [(String, Int?)] {
            let preview = BundlePreview.single(flow: Data(flow(screens: [pre, "b"], navigate: target).utf8))
            let buttons = preview.placements.first?.screens.first?.components.compactMap { component in
                if case .button(_, .navigate(_, let targetIndex)) = component { return targetIndex ?? -1 }
                return nil
            }
            #expect(buttons == [index ?? -1], "navigate to \(Array(target.utf8))")
        }
        // A font used by one spelling and declared by the other is undeclared.
        let (_, fontFindings) = validate(flow(screens: ["a"], declared: [pre], used: de))
        #expect(fontFindings.map(\.rule) == ["flow-font-undeclared"], "\(fontFindings.map(\.line))")
        #expect(validate(flow(screens: ["a"], declared: [pre], used: pre)).1.isEmpty)
        // Two image urls that differ in their bytes are two media (warm downloads each).
        let (doc, imageFindings) = validate(flow(screens: ["a"], images: [pre, de, pre]))
        #expect(imageFindings.isEmpty)
        let images = try #require(doc?.allImages)
        #expect(
            images.count == 2 && images[0].hasSuffix("\(pre).png")
                && images[1].utf8.elementsEqual("https://img.example/\(de).png".utf8))
        #expect(doc?.firstScreenImages.count == 2)
    }

    @Test("the sample flows are valid and their content hashes match")
    func samplesValid() throws {
        for (bundle, name) in [
            ("demo", "onboarding"), ("demo", "paywall"), ("travel", "welcome"), ("travel", "trip-upsell"),
        ] {
            let (doc, findings) = FlowDocument.validate(data: try sampleFlow(bundle, name), location: name)
            #expect(findings.isEmpty, "\(name): \(findings.map(\.line))")
            #expect(doc?.contentHash == doc.map { FlowDocument.computeContentHash($0.json) })
        }
    }

    @Test("first-screen media are screen 0 and every persistent zone; all-screens adds the rest; never lottie or video")
    func mediaSets() throws {
        let (doc, _) = FlowDocument.validate(data: try sampleFlow("demo", "onboarding"), location: "o")
        let flow = try #require(doc)
        #expect(
            flow.firstScreenImages == [
                "https://cdn.example.com/demo/welcome.png", "https://cdn.example.com/demo/logo.png",
            ])
        #expect(
            Set(flow.allImages)
                == Set(
                    flow.firstScreenImages + [
                        "https://cdn.example.com/demo/step-sync.png", "https://cdn.example.com/demo/step-notify.png",
                    ]))
        #expect(!flow.allImages.contains { $0.hasSuffix(".json") || $0.hasSuffix(".mp4") })
    }

    @Test("images nested in stacks count as media of their screen")
    func nestedImages() throws {
        let (doc, _) = FlowDocument.validate(data: try sampleFlow("demo", "paywall"), location: "p")
        #expect(doc?.firstScreenImages.contains("https://cdn.example.com/demo/badge.png") == true)
    }

    @Test(
        "each rule names its JSON path",
        arguments: [
            (
                #"{"schema_version":2,"id":"f","version":"v","screens":[{"id":"a"}]}"#, "flow-schema-version",
                "/schema_version"
            ),
            (#"{"schema_version":1,"id":"","version":"v","screens":[{"id":"a"}]}"#, "flow-field", "/id"),
            (#"{"schema_version":1,"id":"f","version":"v","screens":[]}"#, "flow-screens", "/screens"),
            (
                #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a"},{"id":"a"}]}"#,
                "flow-duplicate-screen", "/screens/1/id"
            ),
            (
                #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a","components":[{"type":"image","src":"/rel.png"}]}]}"#,
                "flow-media-src", "/screens/0/components/0/src"
            ),
            (
                #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a","components":[{"type":"text","font":"X"}]}]}"#,
                "flow-font-undeclared", "/screens/0/components/0/font"
            ),
            (
                #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a","components":[{"type":"button","action":{"type":"navigate","screen":"b"}}]}]}"#,
                "flow-navigate", "/screens/0/components/0/action/screen"
            ),
            (
                #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a","components":[{"type":"button","action":{"type":"purchase"}}]}]}"#,
                "flow-action", "/screens/0/components/0/action/product_id"
            ),
            (
                #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a","components":[{"type":"button","action":{"type":"open_link","url":"no scheme"}}]}]}"#,
                "flow-action", "/screens/0/components/0/action/url"
            ),
            (
                #"{"schema_version":1,"id":"f","version":"v","content_hash":"sha256:00","screens":[{"id":"a"}]}"#,
                "flow-content-hash", "/content_hash"
            ),
        ])
    func rules(json: String, rule: String, pointer: String) {
        let (doc, findings) = validate(json)
        #expect(doc == nil)
        #expect(
            findings.contains { $0.rule == rule && $0.path == "f.json#\(pointer)" && $0.severity == .error },
            "\(findings.map(\.line))")
    }

    @Test("a newer schema version says to upgrade fpctl")
    func newerSchema() {
        let (_, findings) = validate(#"{"schema_version":3,"id":"f","version":"v","screens":[{"id":"a"}]}"#)
        #expect(findings.first?.message.contains("newer than this fpctl understands") == true)
    }

    @Test("an unknown component type is a warning, and the flow stays valid")
    func unknownTypeWarns() {
        let (doc, findings) = validate(
            #"{"schema_version":1,"id":"f","version":"v","screens":[{"id":"a","components":[{"type":"carousel"}]}]}"#)
        #expect(doc != nil)
        #expect(findings.map(\.severity) == [.warning])
        #expect(doc?.unknownComponentTypes == ["carousel"])
    }

    @Test("the minimal flow is valid")
    func minimalValid() {
        #expect(validate(minimal).1.isEmpty)
    }
}
