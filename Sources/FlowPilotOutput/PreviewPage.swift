import FlowPilotCore
import Foundation

/// `bundle preview` as one self-contained HTML page: no script, a
/// Content-Security-Policy that loads nothing but `data:` images and fonts and
/// inline styles, every string from a flow escaped, no URL from a flow made live,
/// each image's and font's bytes once (a CSS class per file), and the same bytes
/// for the same bundle.
public enum PreviewPage {
    public static let contentSecurityPolicy =
        "default-src 'none'; img-src data:; font-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

    /// One bundle: its findings, then every placement's screens.
    public static func render(_ preview: BundlePreview) -> [UInt8] {
        let styles = AssetStyles([preview])
        var page = HTMLBuffer(capacity: styles.encodedSize + (1 << 20))
        page.head(title: "fpctl bundle preview: \(preview.appID)", styles: styles)
        page.bundleHeader(preview, heading: "Bundled default: \(preview.appID)")
        for (index, placement) in preview.placements.enumerated() {
            page.raw("<section class=\"placement\" id=\"p\(index)\">\n<h2>")
            page.text(placement.key)
            page.raw("</h2>\n")
            page.placement(placement, anchor: "p\(index)", styles: styles, side: 0)
            page.raw("</section>\n")
        }
        page.raw("</body>\n</html>\n")
        return page.bytes
    }

    /// Two bundles, placement by placement, changed placements first.
    public static func render(_ comparison: BundleComparison) -> [UInt8] {
        let styles = AssetStyles([comparison.old, comparison.new])
        var page = HTMLBuffer(capacity: styles.encodedSize + (1 << 20))
        page.head(
            title: "fpctl bundle preview: \(comparison.old.appID) → \(comparison.new.appID)", styles: styles)
        page.raw("<div class=\"sides\">\n<div class=\"side\">\n")
        page.bundleHeader(comparison.old, heading: "Old: \(comparison.old.appID)")
        page.raw("</div>\n<div class=\"side\">\n")
        page.bundleHeader(comparison.new, heading: "New: \(comparison.new.appID)")
        page.raw("</div>\n</div>\n")
        page.changeTable(comparison.rows)
        for (index, row) in comparison.rows.enumerated() {
            page.raw("<section class=\"placement change-\(row.change.rawValue)\" id=\"p\(index)\">\n<h2>")
            page.text(row.key)
            page.raw(" <span class=\"badge \(row.change.rawValue)\">\(row.change.rawValue)</span></h2>\n")
            page.raw("<div class=\"sides\">\n")
            for (side, placement) in [row.old, row.new].enumerated() {
                page.raw("<div class=\"side\">\n")
                if let placement {
                    page.placement(placement, anchor: "\(side == 0 ? "o" : "n")\(index)", styles: styles, side: side)
                } else {
                    page.raw("<p class=\"absent\">not in the \(side == 0 ? "old" : "new") bundle</p>\n")
                }
                page.raw("</div>\n")
            }
            page.raw("</div>\n</section>\n")
        }
        page.raw("</body>\n</html>\n")
        return page.bytes
    }
}

/// The CSS class of every image and font file, and the style sheet that carries
/// their bytes, once each.
struct AssetStyles {
    /// Per bundle: bundle path -> class.
    private var classes: [[String: String]] = []
    /// Each file with its class, in the style sheet's order.
    private var sheet: [(asset: BundlePreview.Asset, name: String)] = []

    init(_ previews: [BundlePreview]) {
        for (side, preview) in previews.enumerated() {
            var mine: [String: String] = [:]
            for path in preview.assets.keys.sorted() {
                guard let asset = preview.assets[path] else { continue }
                // Two bundles share a file's class when its path and bytes match.
                if let earlier = (0..<side).first(where: { previews[$0].assets[path]?.data == asset.data }),
                    let shared = classes[earlier][path]
                {
                    mine[path] = shared
                    continue
                }
                let name = "a\(sheet.count)"
                mine[path] = name
                sheet.append((asset, name))
            }
            classes.append(mine)
        }
    }

    /// The class of the file at `path` in the `side`th bundle.
    func className(_ path: String, side: Int) -> String? { classes[side][path] }

    /// Bytes the style sheet's data URLs take.
    var encodedSize: Int { sheet.reduce(0) { $0 + ($1.asset.data.count + 2) / 3 * 4 } }

    /// The rules, each file's bytes base64-encoded straight into the page.
    func write(into page: inout HTMLBuffer) {
        for (asset, name) in sheet {
            guard let type = asset.type, let mime = Self.mime[type] else { continue }
            if Self.fontTypes.contains(type) {
                page.raw("@font-face{font-family:\"fp-\(name)\";src:url(\"data:\(mime);base64,")
                page.base64(asset.data)
                page.raw("\")}\n.\(name){font-family:\"fp-\(name)\",system-ui,sans-serif}\n")
            } else {
                page.raw(".\(name){background-image:url(\"data:\(mime);base64,")
                page.base64(asset.data)
                let size = asset.size.map { "width:min(100%,\($0.width)px);aspect-ratio:\($0.width)/\($0.height)" }
                page.raw("\");\(size ?? "width:100%;height:160px")}\n")
            }
        }
    }

    private static let fontTypes: Set<MediaType> = [.ttf, .otf, .woff, .woff2]
    private static let mime: [MediaType: String] = [
        .png: "image/png", .jpeg: "image/jpeg", .gif: "image/gif", .webp: "image/webp",
        .ttf: "font/ttf", .otf: "font/otf", .woff: "font/woff", .woff2: "font/woff2",
    ]
}
