import Foundation
import FuzzSupport

@testable import FlowPilotCore
@testable import FlowPilotOutput

// The preview page of an arbitrary flow: never crashes, and whatever the flow
// says, the page is only fpctl's own markup. Every tag is one the renderer
// writes, no attribute runs or loads anything (no on…, no src, href only to a
// frame on the page), no `>` of a flow's text is left unescaped, and there is a
// frame for every screen.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPreview(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let flow = Fuzz.bytes(start, count)
    let preview = BundlePreview.single(
        flow: flow, media: ["https://cdn.example.com/a.png": PreviewFuzz.png], fonts: ["F": Data("true".utf8)])
    let page = PreviewPage.render(preview)
    PreviewFuzz.checkMarkup(page)
    let screens = preview.placements.first?.problem == nil ? preview.placements.first?.screens.count ?? 0 : 0
    let frames = String(decoding: page, as: UTF8.self).components(separatedBy: "<figure class=\"phone\"").count - 1
    Fuzz.check(frames == screens, "\(screens) screens drawn as \(frames) frames")
    return 0
}

enum PreviewFuzz {
    /// A 1x1 PNG.
    static let png =
        Data(
            base64Encoded:
                "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
        ?? Data()

    static let tags: Set<String> = [
        "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "dl", "dt", "dd", "p",
        "div", "section", "figure", "figcaption", "a", "span", "b", "br", "ul", "li", "table", "thead", "tbody", "tr",
        "th", "td",
    ]
    static let attributes: Set<String> = [
        "lang", "charset", "http-equiv", "content", "name", "class", "id", "href", "role", "aria-label", "title",
    ]

    static func checkMarkup(_ page: [UInt8]) {
        var i = 0
        func isName(_ b: UInt8) -> Bool {
            (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x21
        }
        while i < page.count {
            let byte = page[i]
            if byte == UInt8(ascii: ">") { Fuzz.fail("a bare '>' in text at byte \(i)") }
            guard byte == UInt8(ascii: "<") else {
                i += 1
                continue
            }
            i += 1
            if i < page.count, page[i] == UInt8(ascii: "/") { i += 1 }
            let nameStart = i
            while i < page.count, isName(page[i]) { i += 1 }
            let name = String(decoding: page[nameStart..<i], as: UTF8.self)
            Fuzz.check(tags.contains(name), "a tag the renderer does not write: <\(name)")
            // Attributes: name="value", values never hold a quote.
            while i < page.count, page[i] != UInt8(ascii: ">") {
                if page[i] == UInt8(ascii: " ") {
                    i += 1
                    continue
                }
                let attrStart = i
                while i < page.count, isName(page[i]) { i += 1 }
                let attr = String(decoding: page[attrStart..<i], as: UTF8.self)
                if name == "!DOCTYPE" { continue }
                Fuzz.check(attributes.contains(attr), "an attribute the renderer does not write: \(attr) on <\(name)")
                guard i + 1 < page.count, page[i] == UInt8(ascii: "="), page[i + 1] == UInt8(ascii: "\"") else {
                    Fuzz.fail("attribute \(attr) on <\(name) without a quoted value")
                }
                i += 2
                let valueStart = i
                while i < page.count, page[i] != UInt8(ascii: "\"") { i += 1 }
                let value = String(decoding: page[valueStart..<i], as: UTF8.self)
                if attr == "href" {
                    Fuzz.check(
                        value.hasPrefix("#p0-s") && value.dropFirst(5).allSatisfy(\.isNumber), "a live link: \(value)")
                }
                i += 1
            }
            i += 1
            // The style sheet is fpctl's own: skip to its end.
            if name == "style", let end = find(Array("</style>".utf8), in: page, from: i) { i = end }
        }
    }

    static func find(_ needle: [UInt8], in page: [UInt8], from: Int) -> Int? {
        guard needle.count <= page.count else { return nil }
        var i = from
        while i + needle.count <= page.count {
            if page[i] == needle[0], Array(page[i..<(i + needle.count)]) == needle { return i }
            i += 1
        }
        return nil
    }
}
