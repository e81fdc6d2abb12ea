import CZlib
import Foundation

/// Writes the canonical `.fpbundle` zip (docs/bundle-format.md) byte by byte:
/// every header, descriptor and record comes from `CanonicalHeader`, the same
/// field lists `bundle validate` checks against, so no installed library's
/// version can change a byte of them. Deflated data comes from zlib at level 6
/// (raw deflate, window 15 bits, memory level 8, default strategy); CRC-32 from
/// libdeflate. The bytes reach the file through `WriteBehind`, so the write(2)
/// calls run beside CRC-32 and deflate.
///
/// Entries are streamed: each local header is written before its data, and
/// the sizes and CRC follow the data in a descriptor (`FLAGS` 0x0008), so no
/// entry is held in memory and nothing is written twice.
final class ZipWriter {
    /// What docs/bundle-format.md fixes: zlib's `Z_DEFAULT_COMPRESSION`.
    static let deflateLevel: Int32 = 6
    /// The format's limits without zip64: entries and every offset and size.
    static let maximumEntries = Int(UInt16.max)
    static let maximumOffset = Int64(UInt32.max)

    private let output: WriteBehind
    private let dos: (date: UInt16, time: UInt16)
    private let extra: [(id: UInt16, data: [UInt8])]
    private let extraLength: UInt16
    private var offset: Int64 = 0
    private var central: [UInt8] = []
    private var entries = 0
    private var deflater: Deflater?
    private var closed = false

    /// Writes an archive to `output`'s descriptor; every entry's times are
    /// `modified`, which must be in the zip date range (1980-2107).
    init(output file: AtomicFile.Output, modified: Date) throws {
        guard let dos = ZipDate.dos(modified) else {
            throw ArchiveError(message: "\(modified): outside the zip date range 1980-2107")
        }
        self.dos = dos
        extra = CanonicalHeader.extraFields(createdAt: modified)
        extraLength = CanonicalHeader.length(of: extra)
        output = WriteBehind(descriptor: file.descriptor)
    }

    /// Adds one regular file of `size` bytes, stored or deflated; `body` is
    /// called with a sink to stream exactly those bytes.
    func addFile(
        path: String, size: Int64, store: Bool,
        body: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
    ) throws {
        precondition(!closed, "ZipWriter used after close")
        guard entries < Self.maximumEntries else { throw ArchiveError(message: "more than 65,535 entries") }
        guard size >= 0, size <= Self.maximumOffset else {
            throw ArchiveError(message: "\(path): \(size) bytes is more than a zip without zip64 can hold")
        }
        let name = Array(path.utf8)
        let start = offset
        var entry = CanonicalHeader.Entry(
            name: name, method: store ? 0 : 8, crc32: 0, compressedSize: 0, size: UInt32(size),
            localHeaderOffset: try Self.fits(start, path))
        try emit(
            CanonicalHeader.encode(
                CanonicalHeader.localHeader(entry, dos: dos, extraLength: extraLength), name: name, extra: extra))
        var crc = CRC32()
        var read: Int64 = 0
        let dataStart = offset
        if store {
            try body { chunk in
                crc.update(chunk)
                read += Int64(chunk.count)
                try emit(chunk)
            }
        } else {
            let deflater = try self.deflater ?? Deflater()
            self.deflater = deflater
            try deflater.reset()
            try body { chunk in
                crc.update(chunk)
                read += Int64(chunk.count)
                try deflater.deflate(chunk, finish: false) { try emit($0) }
            }
            try deflater.deflate(UnsafeRawBufferPointer(start: nil, count: 0), finish: true) { try emit($0) }
        }
        guard read == size else {
            throw ArchiveError(message: "\(path) changed while it was being archived (\(read) bytes, expected \(size))")
        }
        entry = CanonicalHeader.Entry(
            name: name, method: entry.method, crc32: crc.value,
            compressedSize: try Self.fits(offset - dataStart, path), size: UInt32(size),
            localHeaderOffset: entry.localHeaderOffset)
        try emit(CanonicalHeader.encode(CanonicalHeader.dataDescriptor(entry)))
        central += CanonicalHeader.encode(
            CanonicalHeader.centralRecord(entry, dos: dos, extraLength: extraLength), name: name, extra: extra)
        entries += 1
    }

    /// Writes the central directory and the end record, then waits for every
    /// write: a disk that filled at the end fails here.
    func close() throws {
        guard !closed else { return }
        closed = true
        let centralOffset = try Self.fits(offset, "the central directory")
        let centralSize = try Self.fits(Int64(central.count), "the central directory")
        try emit(central)
        try emit(
            CanonicalHeader.encode(
                CanonicalHeader.endRecord(
                    entries: UInt16(entries), centralSize: centralSize, centralOffset: centralOffset)))
        try output.finish()
    }

    private func emit(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try emit($0) }
    }

    private func emit(_ bytes: UnsafeRawBufferPointer) throws {
        try output.append(bytes)
        offset += Int64(bytes.count)
    }

    /// `value` as a 32-bit zip field, or an error naming what outgrew it.
    private static func fits(_ value: Int64, _ what: String) throws -> UInt32 {
        guard let v = UInt32(exactly: value) else {
            throw ArchiveError(message: "\(what): past 4 GiB, more than a zip without zip64 can hold")
        }
        return v
    }
}

/// One zlib raw-deflate stream, reset for each entry; output in 64 KiB pieces.
private final class Deflater {
    private var stream = z_stream()
    private var out: [UInt8] = Array(repeating: 0, count: 1 << 16)

    init() throws {
        let status = fpctl_deflate_init_raw(&stream, ZipWriter.deflateLevel)
        guard status == Z_OK else { throw ArchiveError(message: "zlib: deflateInit2 failed (\(status))") }
    }

    deinit { deflateEnd(&stream) }

    func reset() throws {
        let status = deflateReset(&stream)
        guard status == Z_OK else { throw ArchiveError(message: "zlib: deflateReset failed (\(status))") }
    }

    /// Compresses `input` (all of it), handing every output piece to `sink`;
    /// with `finish`, ends the stream.
    func deflate(
        _ input: UnsafeRawBufferPointer, finish: Bool, sink: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        stream.next_in = UnsafeMutablePointer(
            mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        let flush = finish ? Z_FINISH : Z_NO_FLUSH
        while true {
            let (status, produced) = out.withUnsafeMutableBytes { buffer -> (Int32, Int) in
                stream.next_out = buffer.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(buffer.count)
                let status = CZlib.deflate(&stream, flush)
                return (status, buffer.count - Int(stream.avail_out))
            }
            guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                throw ArchiveError(message: "zlib: deflate failed (\(status))")
            }
            if produced > 0 { try out.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[0..<produced])) } }
            if finish ? status == Z_STREAM_END : (stream.avail_in == 0 && produced < out.count) { break }
        }
    }
}
