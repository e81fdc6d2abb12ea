import CDeflate
import Foundation
import FuzzSupport

@testable import FlowPilotCore

// The media structure check (`media-corrupt`) on arbitrary bytes: the first byte
// picks the type, the second how the rest is cut into chunks. Never a crash; the
// verdict never depends on the chunking; the CRC-32 it keeps for the zip check is
// the CRC-32 of the bytes, whatever they are; and for the types that mark their own
// end (PNG's IEND, GIF's trailer, WebP's and WOFF's lengths), a file one byte
// shorter than one that passes never passes too.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMedia(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Fuzz.bytes(start, count)
    guard input.count >= 2 else { return 0 }
    let type = MediaType.allCases[Int(input[0]) % MediaType.allCases.count]
    let chunk = Int(input[1]) + 1
    let file = Array(input.dropFirst(2))
    func verdict(_ bytes: [UInt8], chunk: Int) -> String? {
        var structure = MediaStructure(type: type)
        var i = 0
        while i < bytes.count {
            structure.update(Array(bytes[i..<min(i + chunk, bytes.count)]))
            i += chunk
        }
        return structure.finish()
    }
    var structure = MediaStructure(type: type)
    structure.update(file)
    let direct = file.withUnsafeBytes { $0.isEmpty ? 0 : UInt32(libdeflate_crc32(0, $0.baseAddress, $0.count)) }
    Fuzz.check(structure.fileCRC == direct, "\(type): the file's CRC-32 is not the one of its bytes")
    let whole = verdict(file, chunk: max(file.count, 1))
    Fuzz.check(verdict(file, chunk: chunk) == whole, "\(type): chunks of \(chunk) change the verdict")
    if whole == nil, !file.isEmpty, [.png, .gif, .webp, .woff, .woff2].contains(type) {
        Fuzz.check(verdict(Array(file.dropLast()), chunk: chunk) != nil, "\(type): a cut file passes")
    }
    return 0
}
