import Crypto
import Foundation

/// Lowercase hex SHA-256, the one digest the formats use.
public enum Digest {
    public static func sha256Hex<D: DataProtocol>(_ data: D) -> String {
        hex(SHA256.hash(data: data))
    }

    public static func hex<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        if let fast = bytes.withContiguousStorageIfAvailable({ hex(UnsafeRawBufferPointer($0)) }) { return fast }
        var out = [UInt8]()
        for b in bytes {
            out.append(digit(b >> 4))
            out.append(digit(b & 0xF))
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func hex(_ digest: SHA256Digest) -> String { digest.withUnsafeBytes { hex($0) } }

    /// Contiguous bytes, written straight into the string's storage.
    public static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        guard !bytes.isEmpty else { return "" }
        return String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, b) in bytes.enumerated() {
                out[2 * index] = digit(b >> 4)
                out[2 * index + 1] = digit(b & 0xF)
            }
            return bytes.count * 2
        }
    }

    /// `hex(bytes)`'s digits appended to `out`, no string made.
    public static func appendHex(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        for byte in bytes {
            out.append(digit(byte >> 4))
            out.append(digit(byte & 0xF))
        }
    }

    @inline(__always)
    static func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }
}
