import Foundation
import Synchronization

/// File and directory names of the cache layout (docs/cache-format.md).
///
/// Metadata that listing commands need lives in names, so `cache info`,
/// `cache list` and `cache prune` cost a directory walk, not a read per entry.
/// Free text (placement keys, user ids, flow ids) is percent-encoded: bytes
/// outside `[A-Za-z0-9_.-]`, a leading `.`, and `~` (the field separator) become `%XX`.
public enum CacheNames {

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    public static func encode(_ text: String) -> String {
        var text = text
        let encoded: String? = text.withUTF8 { bytes in
            // Most names (placements, user ids, versions) need no escape: the string as it is.
            if !bytes.isEmpty && bytes[0] != UInt8(ascii: ".") && bytes.allSatisfy(isPlain) { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(bytes.count + 8)
            for (i, byte) in bytes.enumerated() {
                if isPlain(byte) && (byte != UInt8(ascii: ".") || i > 0) {
                    out.append(byte)
                } else {
                    out.append(UInt8(ascii: "%"))
                    out.append(hexDigits[Int(byte >> 4)])
                    out.append(hexDigits[Int(byte & 0x0F)])
                }
            }
            return out.isEmpty ? "%" : String(decoding: out, as: UTF8.self)
        }
        return encoded ?? text
    }

    /// `[A-Za-z0-9_.-]`.
    private static func isPlain(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    public static func decode(_ name: Substring) -> String? {
        if name == "%" { return "" }
        var bytes: [UInt8] = []
        var i = name.utf8.startIndex
        let u = name.utf8
        while i < u.endIndex {
            if u[i] == UInt8(ascii: "%") {
                let h = u.index(after: i)
                guard h < u.endIndex, u.index(after: h) < u.endIndex,
                    let v = UInt8(String(decoding: u[h...u.index(after: h)], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(v)
                i = u.index(h, offsetBy: 2)
            } else {
                bytes.append(u[i])
                i = u.index(after: i)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Encoded text, or `#` + a hash when the encoding would not fit in a name.
    static func bounded(_ text: String, max: Int) -> String {
        let e = encode(text)
        return e.utf8.count <= max ? e : hashed(text)
    }

    /// `#` and the first 32 hex digits of the SHA-256 of the text: a field too
    /// long for a name (an encoded field never starts with `#`, which encodes as `%23`).
    static func hashed(_ text: String) -> String {
        "#" + String(Digest.sha256Hex(Data(text.utf8)).prefix(32))
    }

    /// The directory name of a placement under `flows/` and `aliases/`.
    static func placement(_ placement: String) -> String { bounded(placement, max: CacheStore.maxNameField) }

    /// The longest file name a file system takes (`NAME_MAX`).
    static let maxName = 255

    /// `<unix ms>~<unique>` — sorts by time; unique per writer so two writers never collide.
    static func stamp(_ date: Date) -> String {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        // printf's %014lld: zero-padded to 14 characters, a sign counting as one.
        let digits = String(ms.magnitude)
        let padding = String(repeating: "0", count: max(0, (ms < 0 ? 13 : 14) - digits.count))
        return (ms < 0 ? "-" : "") + padding + digits + "~" + String(nextUnique(), radix: 36)
    }

    /// The unique parts: a Weyl sequence from a random start (one `getrandom`
    /// a process, not one a name), so no two of a process's names share one
    /// before 2^64 of them, and two processes' are as unlikely to meet as two
    /// random numbers.
    private static let uniques = Atomic<UInt64>(UInt64.random(in: 0 ... .max))
    static func nextUnique() -> UInt64 {
        uniques.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
    }

    static func parseStamp(_ s: Substring) -> Date? {
        guard let ms = Int64(s) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(ms) / 1000)
    }
}
