import CDeflate

/// The zip CRC-32 (APPNOTE 4.4.7), computed by libdeflate with the CPU's
/// carry-less multiply where it has one.
struct CRC32 {
    private(set) var value: UInt32 = 0

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        value = libdeflate_crc32(value, base, bytes.count)
    }
}
