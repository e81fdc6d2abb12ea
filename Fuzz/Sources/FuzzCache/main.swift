import Foundation
import FuzzSupport

@testable import FlowPilotCore

// Cache entry names and entry files, as the SDK's layout implies them: the first
// line is `<key dir>/<entry name>`, the rest the entry's JSON. Names encode and
// decode back to the same text, every encoded name is a safe file name, and a
// name that parses leads to a reader that never crashes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCache(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Fuzz.bytes(start, count)
    let newline = data.firstIndex(of: 0x0A) ?? data.endIndex
    let first = String(decoding: data[..<newline], as: UTF8.self)
    let body = newline < data.endIndex ? data[(newline + 1)...] : Data()

    checkLog(data, body: body)

    let encoded = CacheNames.encode(first)
    Fuzz.check(CacheNames.decode(Substring(encoded)) == first, "encode/decode changed \(first.debugDescription)")
    Fuzz.check(!encoded.hasPrefix(".") && !encoded.isEmpty, "unsafe name \(encoded)")
    Fuzz.check(
        encoded.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x25 || b == 0x2D
                || b == 0x2E || b == 0x5F
        }, "encoded name has a byte outside [A-Za-z0-9%._-]: \(encoded)")
    let bounded = CacheNames.bounded(first, max: 64)
    Fuzz.check(bounded.utf8.count <= 64, "bounded name is too long")
    _ = CacheNames.decode(Substring(first))

    let parts = first.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2,
        let entry = CacheStore.parseEntryName(
            placement: "home", keyDir: String(parts[0]), name: String(parts[1]), size: Int64(body.count),
            path: "fuzz/\(first)")
    else { return 0 }
    let (doc, size, problem) = CacheStore.inspectEntry(entry, data: Data(body))
    Fuzz.check(size == Int64(body.count), "entry size misreported")
    Fuzz.check((doc == nil) == (problem != nil), "an entry neither read nor refused")
    return 0
}

/// The same bytes as a format-2 segment's records: reading them never traps,
/// each whole record read in place (`LogRecord.View`) is the record it
/// encodes back to; the key scan never traps either; the records' facts read back
/// as written, and any bytes as a facts file are checked without a trap. The body as a log summary: one that parses reads back the same from its JSON.
func checkLog(_ data: Data, body: Data) {
    let segment = LogSegment.magic + Array(data)
    segment.withUnsafeBytes { raw in
        let read = LogSegment.records(in: raw)
        for (_, record) in read.records {
            var again: [UInt8] = []
            record.encode(into: &again)
            let back = again.withUnsafeBytes { bytes -> LogRecord? in
                if case .record(let view, _) = LogRecord.decode(bytes, at: 0) { return view.record }
                return nil
            }
            Fuzz.check(back == record, "a record read does not encode back to itself: \(record)")
        }
        _ = LogRecord.keyPrefixes(raw, from: LogSegment.magic.count)
        // The records' facts (`SegmentFacts`) read back as written, slot for slot.
        var builder = SegmentFacts.Builder()
        _ = LogSegment.walk(raw) { _, view in builder.add(view) }
        if !builder.abandoned {
            let stamp = SegmentFacts.Stamp(inode: 7, size: Int64(raw.count), modified: (1, 2))
            let file = SegmentFacts.encode(
                builder, order: Array(builder.slots.indices), covering: UInt64(raw.count), stamp: stamp)
            file.withUnsafeBytes { bytes in
                let checked = SegmentFacts.check(bytes)
                Fuzz.check(checked?.count == builder.slots.count && checked?.stamp == stamp, "facts do not read back")
                if let checked {
                    let slots = UnsafeRawBufferPointer(rebasing: bytes[checked.slotsOffset...])
                    for (n, slot) in builder.slots.enumerated() {
                        Fuzz.check(SegmentFacts.slot(slots, n) == slot, "facts slot \(n) reads back otherwise")
                    }
                    Fuzz.check(checked.placements == builder.placements && checked.objects == builder.objects, "tables")
                }
            }
        }
    }
    // The same bytes as a facts file: checked, never trusted past their checks, never a trap.
    data.withUnsafeBytes { raw in _ = SegmentFacts.check(raw) }
    (SegmentFacts.magic + Array(data)).withUnsafeBytes { raw in _ = SegmentFacts.check(raw) }
    if let json = try? JSONValue.parse(body), let summary = LogSummary(json: json) {
        Fuzz.check(LogSummary(json: summary.json) == summary, "a log summary reads back otherwise from its JSON")
    }
}
