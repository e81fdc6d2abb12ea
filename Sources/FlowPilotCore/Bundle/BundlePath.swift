/// The archive path rule of a bundle:
/// `^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$`, at most 255 bytes a
/// component and 1024 a path. Nothing with case, Unicode or separator tricks
/// survives to a phone's filesystem, and `.`/`..` cannot be written at all.
public enum BundlePath {
    public static let maxComponentBytes = 255
    public static let maxPathBytes = 1024

    public static func isCanonical(_ path: String) -> Bool {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maxPathBytes else { return false }
        var componentStart = true
        var componentLength = 0
        for b in bytes {
            if b == UInt8(ascii: "/") {
                if componentStart { return false }
                componentStart = true
                componentLength = 0
                continue
            }
            let lowerOrDigit =
                (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
            if componentStart {
                guard lowerOrDigit else { return false }
                componentStart = false
            } else {
                guard lowerOrDigit || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-") else {
                    return false
                }
            }
            componentLength += 1
            if componentLength > maxComponentBytes { return false }
        }
        return !componentStart
    }

    /// Why a path is not canonical, as (rule, message), checking the dangerous
    /// cases first so the finding names what an attacker tried.
    public static func problem(_ path: String) -> (rule: String, message: String)? {
        if isCanonical(path) { return nil }
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        if path.contains("\\") { return ("zip-path-backslash", "path contains a backslash") }
        if path.hasPrefix("/") || (path.count >= 2 && Array(path)[1] == ":") {
            return ("zip-path-absolute", "path is absolute")
        }
        if components.contains(where: { $0 == ".." }) {
            return ("zip-path-traversal", "path escapes the archive with '..'")
        }
        if path.hasSuffix("/") { return ("zip-entry-type", "entry is a directory; bundles hold regular files only") }
        if path.utf8.count > maxPathBytes || components.contains(where: { $0.utf8.count > maxComponentBytes }) {
            return (
                "zip-path-length",
                "path longer than \(maxPathBytes) bytes or a component longer than \(maxComponentBytes)"
            )
        }
        return ("zip-path-noncanonical", "path does not match ^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$")
    }

    /// Extensions whose content is already compressed: stored, not deflated.
    public static let storedExtensions: Set<String> = [
        "png", "jpg", "jpeg", "gif", "webp", "woff", "woff2", "mp4", "zip",
    ]

    public static func isStored(_ path: String) -> Bool {
        guard let dot = path.lastIndex(of: ".") else { return false }
        return storedExtensions.contains(String(path[path.index(after: dot)...]))
    }

    /// Lowercased extension of a file name, or "bin" when it has none usable.
    public static func normalizedExtension(_ name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "bin" }
        let ext = name[name.index(after: dot)...].lowercased()
        guard !ext.isEmpty, ext.utf8.count <= 16, isCanonical(ext) else { return "bin" }
        return ext
    }
}
