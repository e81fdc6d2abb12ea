import Foundation
import Testing

@testable import FlowPilotCore
@testable import FlowPilotOutput

/// The page's markup without a browser: what a flow says is text, and a link
/// goes only to a frame of the page. (BundlePreviewTests look at it in chromium.)
@Suite("the preview page's markup")
struct PreviewPageTests {
    static func page(_ flow: String) -> String {
        let preview = BundlePreview.single(flow: Data(flow.utf8))
        return String(decoding: PreviewPage.render(preview), as: UTF8.self)
    }

    @Test("markup in a flow's strings is escaped in text and in attributes")
    func escaped() {
        let html = Self.page(
            #"{"id":"f","version":"v","screens":[{"id":"<s>","components":[{"type":"text","text":"a<b>&\"'"},"#
                + #"{"type":"image","src":"https://x/\"><i>"}]}]}"#)
        #expect(html.contains(#"<p class="text">a&lt;b&gt;&amp;&quot;&#39;</p>"#))
        #expect(html.contains("<figcaption>&lt;s&gt;</figcaption>"))
        #expect(html.contains("https://x/&quot;&gt;&lt;i&gt;"))
        #expect(!html.contains("<i>") && !html.contains("a<b>"))
    }

    @Test("navigate links to its screen's frame; a missing screen, open_link and call_delegate are text")
    func actions() {
        let html = Self.page(
            #"{"id":"f","version":"v","screens":[{"id":"a","components":["#
                + #"{"type":"button","text":"n","action":{"type":"navigate","screen":"b"}},"#
                + #"{"type":"button","text":"x","action":{"type":"navigate","screen":"zz"}},"#
                + #"{"type":"button","text":"l","action":{"type":"open_link","url":"https://e.example/"}}]},"#
                + #"{"id":"b","components":[]}]}"#)
        #expect(html.contains(##"<a class="button" href="#p0-s1">n<span class="action">navigate b</span></a>"##))
        #expect(html.contains(#"<div class="button">x<span class="action">navigate zz (no such screen)</span></div>"#))
        #expect(html.contains(#"<span class="action">open_link https://e.example/</span>"#))
        #expect(!html.contains("href=\"https"))
    }

    @Test("an image the bundle lacks is a red 'missing image' box with its URL; lottie and video are labelled boxes")
    func missingAndNeverBundled() {
        let html = Self.page(
            #"{"id":"f","version":"v","screens":[{"id":"a","components":["#
                + #"{"type":"image","src":"https://cdn.example/gone.png"},"#
                + #"{"type":"lottie","src":"https://cdn.example/a.json"},{"type":"video","src":"https://cdn.example/v.mp4"}]}]}"#
        )
        #expect(html.contains(#"<div class="box missing"><b>missing image</b><br>https://cdn.example/gone.png</div>"#))
        #expect(html.contains(#"<div class="box"><b>lottie (never bundled)</b><br>https://cdn.example/a.json</div>"#))
        #expect(html.contains(#"<div class="box"><b>video (never bundled)</b><br>https://cdn.example/v.mp4</div>"#))
    }

    @Test("a flow that is not JSON is a placement with its problem and no frames")
    func notJSON() {
        let html = Self.page("{")
        #expect(html.contains(#"<p class="box missing">the flow is not JSON: "#))
        #expect(!html.contains("<figure"))
    }
}
