/// Two bundles placement by placement, for the side-by-side preview a pipeline
/// attaches to a change of the bundled default.
public struct BundleComparison: Sendable {
    public enum Change: String, Sendable, CaseIterable {
        case changed, added, removed, same
    }

    public struct Row: Sendable {
        public let key: String
        public let change: Change
        public let old: BundlePreview.Placement?
        public let new: BundlePreview.Placement?
    }

    public let old: BundlePreview
    public let new: BundlePreview
    /// Changed placements first, then added, removed and same; by key within each.
    public let rows: [Row]

    public init(old: BundlePreview, new: BundlePreview) {
        self.old = old
        self.new = new
        let before = Dictionary(old.placements.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        let after = Dictionary(new.placements.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        let keys = CanonicalJSON.sortedKeys(Set(before.keys).union(after.keys))
        let rows = keys.map { key in
            Row(key: key, change: Self.change(before[key], after[key]), old: before[key], new: after[key])
        }
        let order = Dictionary(uniqueKeysWithValues: Change.allCases.enumerated().map { ($1, $0) })
        self.rows = rows.enumerated().sorted { a, b in
            (order[a.element.change] ?? 0, a.offset) < (order[b.element.change] ?? 0, b.offset)
        }.map(\.element)
    }

    /// `changed` when the flow id, the version or the content differs. The content
    /// is the flow's `content_hash`; when neither side has one, the flow file's SHA-256.
    static func change(_ old: BundlePreview.Placement?, _ new: BundlePreview.Placement?) -> Change {
        guard let old else { return .added }
        guard let new else { return .removed }
        let content: (BundlePreview.Placement) -> String? = { p in
            old.contentHash == nil && new.contentHash == nil ? p.fileSHA256 : p.contentHash
        }
        // Ids and hashes as bytes: a flow id re-encoded to another Unicode form is a change (#64).
        let same =
            old.flowID.sameBytes(as: new.flowID) && old.version.sameBytes(as: new.version)
            && content(old).sameBytes(as: content(new))
        return same ? .same : .changed
    }
}
