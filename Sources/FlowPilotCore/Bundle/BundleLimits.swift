/// The hard limits of a bundle, shared by build and validate.
public enum BundleLimits {
    public static let maxEntries = 10_000
    public static let maxEntryBytes: Int64 = 64 << 20
    public static let maxTotalBytes: Int64 = 256 << 20
    public static let maxCompressionRatio: Int64 = 200
    /// JSON documents (manifest, flows) are parsed in memory; they get a tighter
    /// cap than media so that validation stays within its memory budget.
    public static let maxJSONBytes: Int64 = 16 << 20

    static func check(sizes: [(String, Int64)], findings: inout [Finding]) throws {
        if sizes.count + 1 > maxEntries {
            findings.append(
                .error("limit-entries", "-", "\(sizes.count + 1) entries; a bundle holds at most \(maxEntries)"))
        }
        var total: Int64 = 0
        for (path, size) in sizes {
            total += size
            if size > maxEntryBytes {
                findings.append(
                    .error("limit-entry-size", path, "\(size) bytes; an entry holds at most \(maxEntryBytes)"))
            }
        }
        if total > maxTotalBytes {
            findings.append(
                .error("limit-total-size", "-", "\(total) bytes in all; a bundle holds at most \(maxTotalBytes)"))
        }
    }
}
