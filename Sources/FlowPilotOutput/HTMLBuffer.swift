import FlowPilotCore
import Foundation

/// The bytes of a preview page as they are written. `raw` takes the page's own
/// markup; `text` takes anything from a bundle and escapes it, so a flow's
/// strings can only ever be text or a quoted attribute value.
struct HTMLBuffer {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func raw(_ markup: String) { bytes += markup.utf8 }

    /// Escapes `&<>"'`, and turns C0 controls other than tab and newline (which
    /// HTML does not allow) into U+FFFD.
    mutating func text(_ string: String) {
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "&"): bytes += "&amp;".utf8
            case UInt8(ascii: "<"): bytes += "&lt;".utf8
            case UInt8(ascii: ">"): bytes += "&gt;".utf8
            case UInt8(ascii: "\""): bytes += "&quot;".utf8
            case UInt8(ascii: "'"): bytes += "&#39;".utf8
            case 0x09, 0x0A: bytes.append(byte)
            case 0x00..<0x20, 0x7F: bytes += "&#xFFFD;".utf8
            default: bytes.append(byte)
            }
        }
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// `data` in base64 (RFC 4648, padded), encoded straight onto the end of the page.
    mutating func base64(_ data: Data) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: (data.count + 2) / 3 * 4))
        Self.alphabet.withUnsafeBufferPointer { alphabet in
            bytes.withUnsafeMutableBufferPointer { page in
                data.withUnsafeBytes { input in
                    guard let table = alphabet.baseAddress, let out = page.baseAddress.map({ $0 + start }),
                        let from = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    else { return }
                    Self.encode(from, count: input.count, table: table, into: out)
                }
            }
        }
    }

    private static func encode(
        _ input: UnsafePointer<UInt8>, count: Int, table: UnsafePointer<UInt8>, into out: UnsafeMutablePointer<UInt8>
    ) {
        var i = 0
        var o = 0
        while i + 3 <= count {
            let n = Int(input[i]) << 16 | Int(input[i + 1]) << 8 | Int(input[i + 2])
            out[o] = table[n >> 18]
            out[o + 1] = table[n >> 12 & 63]
            out[o + 2] = table[n >> 6 & 63]
            out[o + 3] = table[n & 63]
            i += 3
            o += 4
        }
        guard i < count else { return }
        let two = i + 1 < count
        let n = Int(input[i]) << 16 | (two ? Int(input[i + 1]) << 8 : 0)
        out[o] = table[n >> 18]
        out[o + 1] = table[n >> 12 & 63]
        out[o + 2] = two ? table[n >> 6 & 63] : UInt8(ascii: "=")
        out[o + 3] = UInt8(ascii: "=")
    }

    mutating func head(title: String, styles: AssetStyles) {
        raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
        raw("<meta http-equiv=\"Content-Security-Policy\" content=\"\(PreviewPage.contentSecurityPolicy)\">\n")
        raw("<meta name=\"referrer\" content=\"no-referrer\">\n<meta name=\"generator\" content=\"fpctl\">\n<title>")
        text(title)
        raw("</title>\n<style>\n\(Self.pageStyle)")
        styles.write(into: &self)
        raw("</style>\n</head>\n<body>\n")
    }

    mutating func bundleHeader(_ preview: BundlePreview, heading: String) {
        raw("<header class=\"bundle\">\n<h1>")
        text(heading)
        raw("</h1>\n<dl class=\"meta\">")
        definition("file", preview.file)
        definition("digest", preview.digest ?? "(no manifest digest)")
        definition("app_id", preview.appID)
        definition("created_at", RFC3339.string(preview.createdAt))
        definition("placements", String(preview.placements.count))
        raw("</dl>\n")
        findings(preview.findings)
        raw("</header>\n")
    }

    /// Validation findings, warnings included, as validate's text output bounds them.
    private mutating func findings(_ findings: [Finding]) {
        guard !findings.isEmpty else {
            raw("<p class=\"findings none\">valid: no findings</p>\n")
            return
        }
        let errors = findings.filter { $0.severity == .error }.count
        raw("<div class=\"findings\"><p>\(errors) errors, \(findings.count - errors) warnings</p>\n<ul>\n")
        for finding in findings.bounded() {
            raw("<li class=\"\(finding.severity.rawValue)\">")
            text(finding.line)
            raw("</li>\n")
        }
        raw("</ul></div>\n")
    }

    mutating func changeTable(_ rows: [BundleComparison.Row]) {
        raw("<table class=\"changes\">\n<thead><tr><th>placement</th><th>change</th>")
        raw("<th>old flow</th><th>old version</th><th>new flow</th><th>new version</th></tr></thead>\n<tbody>\n")
        for (index, row) in rows.enumerated() {
            raw("<tr class=\"change-\(row.change.rawValue)\"><td><a href=\"#p\(index)\">")
            text(row.key)
            raw("</a></td><td><span class=\"badge \(row.change.rawValue)\">\(row.change.rawValue)</span></td>")
            for value in [row.old?.flowID, row.old?.version, row.new?.flowID, row.new?.version] {
                raw("<td>")
                text(value ?? "")
                raw("</td>")
            }
            raw("</tr>\n")
        }
        raw("</tbody>\n</table>\n")
    }

    mutating func placement(_ placement: BundlePreview.Placement, anchor: String, styles: AssetStyles, side: Int) {
        raw("<dl class=\"meta\">")
        definition("flow_id", placement.flowID)
        definition("version", placement.version)
        definition("content_hash", placement.contentHash ?? "(none)")
        definition("experiment", placement.experimentID ?? "(none)")
        definition("variant", placement.variant ?? "(none)")
        definition("media", "\(placement.mediaCount) files, \(placement.mediaBytes) bytes")
        definition("fonts", "\(placement.fontCount) files, \(placement.fontBytes) bytes")
        raw("</dl>\n")
        if let problem = placement.problem {
            raw("<p class=\"box missing\">")
            text(problem)
            raw("</p>\n")
            return
        }
        let frame = Frame(anchor: anchor, styles: styles, side: side, screenIDs: placement.screens.map(\.id))
        raw("<div class=\"screens\">\n")
        for (index, screen) in placement.screens.enumerated() {
            frame.screen(screen, index: index, zones: placement.zones, into: &self)
        }
        raw("</div>\n")
    }

    mutating func definition(_ term: String, _ value: String) {
        raw("<dt>\(term)</dt><dd>")
        text(value)
        raw("</dd>")
    }
}

/// Draws a placement's screens: one phone-sized frame each, with the persistent
/// zones where the SDK draws them (the navigation bar above the screen, the
/// footer below it, the overlay over it).
private struct Frame {
    let anchor: String
    let styles: AssetStyles
    let side: Int
    let screenIDs: [String]

    func screenAnchor(_ index: Int) -> String { "\(anchor)-s\(index)" }

    func screen(_ screen: BundlePreview.Screen, index: Int, zones: [BundlePreview.Zone], into page: inout HTMLBuffer) {
        page.raw("<figure class=\"phone\" id=\"\(screenAnchor(index))\">\n<figcaption>")
        page.text(screen.id)
        page.raw("</figcaption>\n<div class=\"device\">\n")
        for zone in zones where zone.name == "navigation_bar" { self.zone(zone, into: &page) }
        page.raw("<div class=\"content\">\n")
        for component in screen.components { self.component(component, into: &page) }
        page.raw("</div>\n")
        for zone in zones where zone.name != "navigation_bar" { self.zone(zone, into: &page) }
        page.raw("</div>\n</figure>\n")
    }

    private func zone(_ zone: BundlePreview.Zone, into page: inout HTMLBuffer) {
        page.raw("<div class=\"zone zone-\(zone.name)\" title=\"\(zone.name)\">\n")
        for component in zone.components { self.component(component, into: &page) }
        page.raw("</div>\n")
    }

    private func component(_ component: BundlePreview.Component, into page: inout HTMLBuffer) {
        switch component {
        case .text(let text, let font, let fontAsset):
            let fontClass = fontAsset.flatMap { styles.className($0, side: side) }
            page.raw("<p class=\"text\(fontClass.map { " \($0)" } ?? "")\">")
            page.text(text)
            if let font, fontClass == nil {
                page.raw("<span class=\"note\"> (font ")
                page.text(font)
                page.raw(" not in the bundle)</span>")
            }
            page.raw("</p>\n")
        case .image(let src, let asset):
            if let asset, let name = styles.className(asset, side: side) {
                page.raw("<div class=\"img \(name)\" role=\"img\" aria-label=\"")
                page.text(src)
                page.raw("\"></div>\n")
            } else {
                labelledBox("missing image", src, missing: true, into: &page)
            }
        case .button(let text, let action):
            button(text, action, into: &page)
        case .stack(let children):
            page.raw("<div class=\"stack\">\n")
            for child in children { self.component(child, into: &page) }
            page.raw("</div>\n")
        case .lottie(let src): labelledBox("lottie (never bundled)", src, missing: false, into: &page)
        case .video(let src): labelledBox("video (never bundled)", src, missing: false, into: &page)
        case .spacer: page.raw("<div class=\"spacer\"></div>\n")
        case .unknown(let type): labelledBox("unknown component", type, missing: false, into: &page)
        }
    }

    private func labelledBox(_ label: String, _ detail: String, missing: Bool, into page: inout HTMLBuffer) {
        page.raw("<div class=\"box\(missing ? " missing" : "")\"><b>\(label)</b><br>")
        page.text(detail)
        page.raw("</div>\n")
    }

    /// A button with its action under its label; `navigate` links to its screen's frame.
    private func button(_ text: String, _ action: BundlePreview.Action, into page: inout HTMLBuffer) {
        if case .navigate(_, let target?) = action {
            page.raw("<a class=\"button\" href=\"#\(screenAnchor(target))\">")
        } else {
            page.raw("<div class=\"button\">")
        }
        page.text(text)
        page.raw("<span class=\"action\">")
        page.text(Self.label(action))
        page.raw("</span>")
        if case .navigate(_, _?) = action { page.raw("</a>\n") } else { page.raw("</div>\n") }
    }

    static func label(_ action: BundlePreview.Action) -> String {
        switch action {
        case .purchase(let product): "purchase \(product)"
        case .restore: "restore"
        case .navigate(let screen, let target): "navigate \(screen)\(target == nil ? " (no such screen)" : "")"
        case .dismiss: "dismiss"
        case .openLink(let url): "open_link \(url)"
        case .callDelegate(let message): "call_delegate \(message)"
        case .other(let type): type.isEmpty ? "no action" : "\(type) (unknown action)"
        }
    }
}

extension HTMLBuffer {
    static let pageStyle = """
        body{margin:0;padding:24px;font:14px/1.45 system-ui,sans-serif;background:#eef0f3;color:#1d2330}
        h1{font-size:20px;margin:0 0 8px}h2{font-size:18px;margin:0 0 8px}
        header.bundle{background:#fff;border-radius:12px;padding:16px 20px;margin-bottom:16px}
        dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:4px 0 12px}
        dl.meta dt{color:#5b6478}dl.meta dd{margin:0;font-family:ui-monospace,monospace;overflow-wrap:anywhere}
        .findings ul{margin:4px 0;padding-left:20px;font:12px/1.5 ui-monospace,monospace;overflow-wrap:anywhere}
        .findings li.error{color:#a4000f}.findings li.warning{color:#7a5200}.findings.none{color:#1a7f37}
        section.placement{margin:24px 0;padding-top:16px;border-top:1px solid #c8ccd4}
        .screens{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}
        figure.phone{margin:0;width:360px}
        figure.phone figcaption{font:600 13px/1.4 ui-monospace,monospace;margin-bottom:6px;overflow-wrap:anywhere}
        .device{position:relative;box-sizing:border-box;width:360px;height:740px;border:10px solid #1d2330;border-radius:36px;background:#fff;overflow:hidden;display:flex;flex-direction:column}
        .content{flex:1;overflow:auto;padding:16px;display:flex;flex-direction:column;gap:12px}
        .zone{padding:8px 16px;display:flex;flex-direction:column;gap:8px}
        .zone-navigation_bar{border-bottom:1px solid #dde1e8}.zone-footer{border-top:1px solid #dde1e8}
        .zone-overlay{position:absolute;inset:0;pointer-events:none;justify-content:flex-end}
        .stack{display:flex;flex-direction:column;gap:8px;padding:8px;border:1px dashed #c8ccd4;border-radius:8px}
        .text{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:16px}
        .note{font:12px ui-monospace,monospace;color:#a4000f}
        .img{max-width:100%;background-position:center;background-size:contain;background-repeat:no-repeat;align-self:center}
        .button{display:block;padding:10px 14px;border-radius:10px;background:#2f5bea;color:#fff;text-align:center;text-decoration:none;overflow-wrap:anywhere}
        .button .action{display:block;font:12px ui-monospace,monospace;opacity:.85}
        .box{border:2px dashed #8a93a6;border-radius:8px;padding:10px;font:12px ui-monospace,monospace;overflow-wrap:anywhere;color:#4a5263;background:#f6f7f9;margin:0}
        .box.missing{border-color:#c4001a;color:#c4001a;background:#fff1f2}
        .spacer{height:16px}
        .sides{display:grid;grid-template-columns:1fr 1fr;gap:24px}.side{min-width:0}
        .absent{color:#5b6478;font-style:italic}
        table.changes{border-collapse:collapse;background:#fff;margin:8px 0 16px}
        table.changes th,table.changes td{padding:4px 10px;border-bottom:1px solid #dde1e8;text-align:left;font-family:ui-monospace,monospace}
        .badge{font:600 12px ui-monospace,monospace;padding:2px 8px;border-radius:10px;background:#dde1e8;color:#1d2330}
        .badge.changed{background:#ffd8a8}.badge.added{background:#c3f0c8}.badge.removed{background:#ffc9c9}

        """
}
