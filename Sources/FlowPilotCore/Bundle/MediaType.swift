/// What a media or font file's first bytes say it is, checked against its
/// extension by `bundle build` and `bundle validate` (rule
/// `media-type-mismatch`): an asset that is not what its name claims, a host
/// file swapped in for an image say, never ships as one.
public enum MediaType: String, Sendable, CaseIterable {
    case png, jpeg, gif, webp, mp4, ttf, otf, woff, woff2

    /// Bytes a sniff needs.
    public static let headSize = 12

    /// The type an extension claims; nil for extensions this check does not cover.
    public init?(extension ext: String) {
        switch ext.lowercased() {
        case "png": self = .png
        case "jpg", "jpeg": self = .jpeg
        case "gif": self = .gif
        case "webp": self = .webp
        case "mp4": self = .mp4
        case "ttf": self = .ttf
        case "otf": self = .otf
        case "woff": self = .woff
        case "woff2": self = .woff2
        default: return nil
        }
    }

    /// The type the content's signature shows, or nil for none of these.
    public init?(sniffing head: some Collection<UInt8>) {
        let b = Array(head.prefix(Self.headSize))
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + magic.count && Array(b[offset..<(offset + magic.count)]) == magic
        }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            self = .png
        } else if starts([0xFF, 0xD8, 0xFF]) {
            self = .jpeg
        } else if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) {
            self = .gif
        } else if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) {
            self = .webp
        } else if starts(Array("ftyp".utf8), at: 4) {
            self = .mp4
        } else if starts([0x00, 0x01, 0x00, 0x00]) || starts(Array("true".utf8)) {
            self = .ttf
        } else if starts(Array("OTTO".utf8)) {
            self = .otf
        } else if starts(Array("wOFF".utf8)) {
            self = .woff
        } else if starts(Array("wOF2".utf8)) {
            self = .woff2
        } else {
            return nil
        }
    }

    /// A finding when `path`'s extension names a type its content is not.
    public static func mismatch(path: String, head: some Collection<UInt8>) -> Finding? {
        let ext = BundlePath.normalizedExtension(path)
        guard let claimed = MediaType(extension: ext) else { return nil }
        let actual = MediaType(sniffing: head)
        guard actual != claimed else { return nil }
        let content = actual?.rawValue ?? "no known media or font type"
        return .error(
            "media-type-mismatch", path, "the content is \(content), the .\(ext) extension says \(claimed.rawValue)")
    }
}
