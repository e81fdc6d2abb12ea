extension BundleLimits {
    /// What a bundle allows of a zip, for `ZipDirectory`: the limits above, the
    /// path rules of `BundlePath`, and the order (manifest.json first, then
    /// manifest.sig when present, then the rest sorted by UTF-8 bytes).
    static let zipPolicy = ZipDirectory.Policy(
        maxEntries: maxEntries, maxEntryBytes: maxEntryBytes, maxTotalBytes: maxTotalBytes,
        maxCompressionRatio: maxCompressionRatio, container: "a bundle",
        nameProblem: { BundlePath.problem($0) }, orderProblems: orderProblems)

    static func orderProblems(_ names: [String]) -> [Finding] {
        var findings: [Finding] = []
        let manifest = names.firstIndex(of: BundleManifest.path)
        if let manifest, manifest != 0 {
            findings.append(
                .error(
                    "manifest-order", BundleManifest.path, "manifest.json is entry \(manifest); it must be the first"))
        } else if manifest == nil {
            findings.append(.error("manifest-missing", BundleManifest.path, "the bundle has no manifest.json"))
        }
        if let sig = names.firstIndex(of: BundleManifest.signaturePath), sig != 1 {
            findings.append(
                .error("manifest-order", BundleManifest.signaturePath, "manifest.sig must be the second entry"))
        }
        let rest = names.filter { $0 != BundleManifest.path && $0 != BundleManifest.signaturePath }
        if let (a, b) = zip(rest, rest.dropFirst()).first(where: { a, b in
            !a.utf8.lexicographicallyPrecedes(b.utf8) && a != b
        }) {
            findings.append(.error("zip-order", b, "entries are not sorted by path (comes after \(a))"))
        }
        return findings
    }
}
