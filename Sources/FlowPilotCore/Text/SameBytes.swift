import Foundation

/// Names compared as bytes. Placements, user ids, flow ids and fingerprints
/// are the backend's UTF-8, hashed byte for byte into fingerprints and keys;
/// Swift's `==` on strings is Unicode canonical equivalence, under which
/// "café" written precomposed (`c3 a9`) equals "cafe" and a combining accent
/// (`65 cc 81`), two identities everywhere else. The cache compares such
/// names with `sameBytes(as:)`, never `==`.
extension StringProtocol {
    /// Whether `other` is the same UTF-8 bytes (one `memcmp` where both
    /// are contiguous, as native strings are).
    @inlinable
    public func sameBytes(as other: some StringProtocol) -> Bool {
        let (a, b) = (utf8, other.utf8)
        guard a.count == b.count else { return false }
        let compared = a.withContiguousStorageIfAvailable { x in
            b.withContiguousStorageIfAvailable { y in
                guard let p = x.baseAddress, let q = y.baseAddress else { return true }  // both empty
                return memcmp(p, q, x.count) == 0
            }
        }
        return (compared ?? nil) ?? a.elementsEqual(b)
    }
}

extension String {
    /// Whether the string's UTF-8 is `bytes` (a name read in place from a record).
    @inlinable
    public func sameBytes(as bytes: UnsafeRawBufferPointer) -> Bool {
        let utf8 = self.utf8
        guard utf8.count == bytes.count else { return false }
        let compared = utf8.withContiguousStorageIfAvailable { x in
            guard let p = x.baseAddress, let q = bytes.baseAddress else { return true }  // both empty
            return memcmp(p, q, x.count) == 0
        }
        return compared ?? utf8.elementsEqual(bytes)
    }
}

extension Optional where Wrapped: StringProtocol {
    /// Both nil, or the same UTF-8 bytes.
    @inlinable
    public func sameBytes(as other: Wrapped?) -> Bool {
        switch (self, other) {
        case (nil, nil): true
        case (let a?, let b?): a.sameBytes(as: b)
        default: false
        }
    }
}

/// A name as a `Set` member or `Dictionary` key, equal and hashed by its
/// UTF-8 bytes: a `String` key merges "café" precomposed with "cafe" and a
/// combining accent, two placements or users everywhere else (#64).
public struct ExactName: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let string: String

    public init(_ string: String) { self.string = string }

    public static func == (a: ExactName, b: ExactName) -> Bool { a.string.sameBytes(as: b.string) }

    public func hash(into hasher: inout Hasher) {
        var string = string
        string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// By bytes, as canonical JSON sorts keys.
    public static func < (a: ExactName, b: ExactName) -> Bool {
        a.string.utf8.lexicographicallyPrecedes(b.string.utf8)
    }

    public var description: String { string }
}

extension Dictionary where Key == String {
    /// The same members keyed by their names' bytes (`JSONValue.object`'s
    /// keys): keys that are distinct strings are distinct bytes, so none is lost.
    public var exactKeys: [ExactName: Value] {
        [ExactName: Value](uniqueKeysWithValues: map { (ExactName($0.key), $0.value) })
    }
}

/// A literal key (`["id": …]`, `members["id"]`): a JSON object's, say.
extension ExactName: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self.init(value) }
}

extension StringProtocol {
    /// Whether `other`'s UTF-8 bytes occur in these (`String.contains` matches
    /// canonically equivalent text, as `==` does).
    public func containsBytes(_ other: some StringProtocol) -> Bool {
        utf8.firstRange(of: other.utf8) != nil
    }

    /// Whether these bytes start with `prefix`'s (`hasPrefix` compares canonically equivalent text).
    public func startsWithBytes(_ prefix: some StringProtocol) -> Bool {
        utf8.starts(with: prefix.utf8)
    }

    /// Whether these bytes end with `suffix`'s.
    public func endsWithBytes(_ suffix: some StringProtocol) -> Bool {
        let (mine, theirs) = (utf8, suffix.utf8)
        return mine.count >= theirs.count && mine.dropFirst(mine.count - theirs.count).elementsEqual(theirs)
    }

    /// The bytes before the first `byte` (all of them when there is none), as a string.
    public func prefixBytes(before byte: UInt8) -> String {
        String(decoding: utf8.prefix { $0 != byte }, as: UTF8.self)
    }
}
