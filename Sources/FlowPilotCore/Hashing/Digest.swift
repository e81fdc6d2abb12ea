import Crypto
import Foundation

/// Lowercase hex SHA-256, the one digest the formats use.
public enum Digest {
    public static func sha256Hex<D: DataProtocol>(_ data: D) -> String {
        hex(SHA256.hash(data: data))
    }

    public static func hex<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
