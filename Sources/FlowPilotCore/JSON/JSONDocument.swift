import Foundation

/// The one layout of every JSON document fpctl prints (docs/decisions.md,
/// "One JSON layout"): one canonical-JSON object (keys sorted by their UTF-8
/// bytes, no insignificant whitespace, slashes unescaped) with its
/// `schema_version` added here, where a member that is an array of objects
/// (`rows`, `files`, `findings`, `placements`) puts each element on a line of
/// its own: `grep` and `head` work on it, and a long one can be written a row
/// at a time (`Stream`) and read back the same way (`WarmOutputFile`).
public enum JSONDocument {
    /// The `schema_version` of every document.
    public static let schemaVersion = 1

    /// The whole document: `members` and `schema_version`, ending in a newline.
    public static func data(_ members: [ExactName: JSONValue]) -> Data {
        var members = members
        members["schema_version"] = .number(Double(schemaVersion))
        return foreign(.object(members))
    }

    /// A document whose schema is another's (SARIF 2.1.0, GitLab Code
    /// Quality), in the same layout with no `schema_version` added: an
    /// object's members in canonical order, each element of a member that
    /// is an array of objects on a line of its own; an array of objects at
    /// the top (GitLab's report) an element a line; ending in a newline.
    public static func foreign(_ value: JSONValue) -> Data {
        var out = Data()
        func lines(_ items: [JSONValue]) -> Bool {
            guard !items.isEmpty, items.allSatisfy({ $0.objectValue != nil }) else { return false }
            out.append(UInt8(ascii: "["))
            for (j, item) in items.enumerated() {
                out.append(contentsOf: (j == 0 ? "\n" : ",\n").utf8)
                out.append(CanonicalJSON.data(item))
            }
            out.append(contentsOf: "\n]".utf8)
            return true
        }
        switch value {
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in CanonicalJSON.sortedMembers(members).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out.append(CanonicalJSON.data(.string(key.string)))
                out.append(UInt8(ascii: ":"))
                if case .array(let items) = value, lines(items) { continue }
                out.append(CanonicalJSON.data(value))
            }
            out.append(UInt8(ascii: "}"))
        case .array(let items) where lines(items):
            break
        default:
            out.append(CanonicalJSON.data(value))
        }
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// A document whose first member is an array of rows, written a row at a
    /// time so that a listing of a million never sits in memory: the same
    /// bytes `data` gives for the whole. The rows' key must sort before every
    /// other member's (`rows` before `run`, `schema_version`, `summary`).
    public struct Stream: Sendable {
        public let key: String
        private var written = 0

        public init(key: String = "rows") { self.key = key }

        /// `{"rows":[`, the first line (the last line starts `],` even after no rows).
        public var start: Data { Data("{".utf8) + CanonicalJSON.data(.string(key)) + Data(":[".utf8) }

        /// One row, after the separator it needs.
        public mutating func row(_ value: JSONValue) -> Data {
            rowData(CanonicalJSON.data(value))
        }

        /// One row already in canonical JSON.
        /// What comes before the next row (a newline, and a comma after the
        /// first): for a caller that writes the row after it itself.
        public mutating func separator() -> StaticString {
            defer { written += 1 }
            return written == 0 ? "\n" : ",\n"
        }

        public mutating func rowData(_ canonical: some Collection<UInt8>) -> Data {
            defer { written += 1 }
            var out = Data(capacity: canonical.count + 2)
            if written > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\n"))
            out.append(contentsOf: canonical)
            return out
        }

        /// The end: the other members and `schema_version`, after the rows.
        public func end(_ members: [ExactName: JSONValue] = [:]) -> Data {
            var members = members
            members["schema_version"] = .number(Double(JSONDocument.schemaVersion))
            precondition(members.keys.allSatisfy { key.utf8.lexicographicallyPrecedes($0.string.utf8) })
            var out = Data("\n]".utf8)
            for (key, value) in CanonicalJSON.sortedMembers(members) {
                out.append(UInt8(ascii: ","))
                out.append(CanonicalJSON.data(.string(key.string)))
                out.append(UInt8(ascii: ":"))
                out.append(CanonicalJSON.data(value))
            }
            out.append(contentsOf: "}\n".utf8)
            return out
        }
    }
}
