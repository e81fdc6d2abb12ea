import Foundation

/// The structure of a zip file as its central directory and local headers state
/// it, checked against each other before a single byte is decompressed.
///
/// libarchive does the decompressing; this is the part it does not do: insist that
/// the central directory, the local headers and the bytes between them tell one
/// consistent story, with nothing hidden before, between or after the entries.
struct ZipDirectory {
    struct Entry {
        let index: Int
        let name: String
        let versionMadeBy: UInt16
        let flags: UInt16
        let method: UInt16
        let crc32: UInt32
        let compressedSize: Int64
        let uncompressedSize: Int64
        let externalAttributes: UInt32
        let localHeaderOffset: Int64
        /// The central record's bytes, for the canonical-form check.
        let centralRecord: [UInt8]
        var isEncrypted: Bool {
            flags & ZipFlag.encrypted != 0 || flags & ZipFlag.strongEncryption != 0 || method == 99
        }
    }

    /// Local header (with name and extra field) and data descriptor bytes, by entry index.
    var localHeaders: [Int: [UInt8]] = [:]
    var descriptors: [Int: [UInt8]] = [:]
    var entries: [Entry]

    private static let maxCentralDirectoryBytes: Int64 = 32 << 20
    /// The end record, a comment of at most 65,535 bytes, and room for a zip64 locator.
    private static let endSearchBytes = EndRecord.size + 65_535 + 20

    /// A structural problem after which nothing more can be read.
    struct Refusal: Error {
        let finding: Finding
        init(_ rule: String, at path: String = "-", _ message: String) { finding = .error(rule, path, message) }
    }

    /// What the archive's format allows beyond zip itself: limits, names and
    /// order. The caller's format (a bundle: `BundleLimits.zipPolicy`) says;
    /// this type knows only zip.
    struct Policy: Sendable {
        var maxEntries: Int
        var maxEntryBytes: Int64
        var maxTotalBytes: Int64
        var maxCompressionRatio: Int64
        /// "a bundle": what the limits' messages say holds at most so much.
        var container: String
        /// A name the format refuses, as (rule, message).
        var nameProblem: @Sendable (String) -> (String, String)?
        /// Findings about the order of the entries' names.
        var orderProblems: @Sendable ([String]) -> [Finding]
    }

    /// Reads and cross-checks the structure. `entries` is empty when the file is
    /// not a readable zip; findings say why.
    static func read(_ file: RandomAccessFile, policy: Policy) -> (ZipDirectory?, [Finding]) {
        do {
            try checkStart(file)
            let (end, endOffset) = try locateEndRecord(file)
            try checkEndRecord(end, endOffset: endOffset, fileSize: file.size, policy: policy)
            let (entries, unexplained) = try readCentralDirectory(file, end)
            var findings = unexplained + checkEntries(entries, policy: policy)
            var directory = ZipDirectory(entries: entries)
            findings += directory.checkLayout(file: file, centralDirectoryOffset: Int64(end.centralDirectoryOffset))
            return (directory, findings)
        } catch {
            return (nil, [error.finding])
        }
    }

    /// A zip starts with a local header (or, empty, with its end record).
    private static func checkStart(_ file: RandomAccessFile) throws(Refusal) {
        guard file.size > 0 else { throw Refusal("not-zip", "empty file") }
        let head = (try? file.read(at: 0, count: Int(min(file.size, 512)))) ?? []
        let signature = head.count >= 4 ? LittleEndianCursor.u32(head, at: 0) : 0
        guard signature == ZipSignature.localHeader || signature == ZipSignature.endRecord else {
            throw Refusal("not-zip", "not a zip archive (\(sniff(head)))")
        }
        guard file.size >= Int64(EndRecord.size) else {
            throw Refusal("zip-truncated", "file ends before the end-of-central-directory record")
        }
    }

    /// The end record, searched for from the end. Canonical bundles have no
    /// comment, so it must be the last 22 bytes; anything else is named.
    private static func locateEndRecord(_ file: RandomAccessFile) throws(Refusal) -> (EndRecord, offset: Int64) {
        let size = file.size
        let tailCount = Int(min(size, Int64(endSearchBytes)))
        guard let tail = try? file.read(at: size - Int64(tailCount), count: tailCount) else {
            throw Refusal("zip-truncated", "cannot read the end of the file")
        }
        guard
            let endIndex = stride(from: tail.count - EndRecord.size, through: 0, by: -1)
                .first(where: { EndRecord(tail, at: $0) != nil }),
            let end = EndRecord(tail, at: endIndex)
        else {
            throw Refusal("zip-truncated", "no end-of-central-directory record: truncated, or not a zip")
        }
        let endOffset = size - Int64(tailCount) + Int64(endIndex)
        let recordEnd = endOffset + Int64(EndRecord.size) + Int64(end.commentLength)
        if recordEnd < size {
            throw Refusal("zip-trailing-bytes", "\(size - recordEnd) bytes after the end of the archive")
        }
        if recordEnd > size { throw Refusal("zip-truncated", "the end record's comment runs past the end of the file") }
        if end.commentLength != 0 {
            throw Refusal("zip-comment", "archive comment present; a canonical bundle has none")
        }
        if endIndex >= 20, LittleEndianCursor.u32(tail, at: endIndex - 20) == ZipSignature.zip64Locator {
            throw Refusal("zip-zip64", "zip64 records are not used by bundles")
        }
        return (end, endOffset)
    }

    /// One disk, no zip64, within the limits, and the central directory right before the end record.
    private static func checkEndRecord(
        _ end: EndRecord, endOffset: Int64, fileSize: Int64, policy: Policy
    ) throws(Refusal) {
        if end.diskNumber != 0 || end.centralDirectoryDisk != 0 || end.entriesOnDisk != end.entryCount {
            throw Refusal("zip-structure", "multi-disk archives are not bundles")
        }
        if end.entryCount == 0xFFFF || end.centralDirectorySize == 0xFFFF_FFFF
            || end.centralDirectoryOffset == 0xFFFF_FFFF
        {
            throw Refusal("zip-zip64", "zip64 records are not used by bundles")
        }
        if Int(end.entryCount) > policy.maxEntries {
            throw Refusal(
                "limit-entries", "\(end.entryCount) entries; \(policy.container) holds at most \(policy.maxEntries)")
        }
        if Int64(end.centralDirectoryOffset) + Int64(end.centralDirectorySize) != endOffset {
            throw Refusal(
                "zip-truncated", "the central directory does not end where the end record begins (truncated or spliced)"
            )
        }
        if Int64(end.centralDirectorySize) > maxCentralDirectoryBytes {
            throw Refusal(
                "limit-entries",
                "central directory of \(end.centralDirectorySize) bytes is larger than any bundle needs")
        }
    }

    /// Every central record, and a finding for bytes the records do not account for.
    private static func readCentralDirectory(_ file: RandomAccessFile, _ end: EndRecord) throws(Refusal) -> (
        [Entry], [Finding]
    ) {
        guard
            let cd = try? file.read(at: Int64(end.centralDirectoryOffset), count: Int(end.centralDirectorySize))
        else {
            throw Refusal("zip-truncated", "cannot read the central directory")
        }
        var entries: [Entry] = []
        var position = 0
        for index in 0..<Int(end.entryCount) {
            guard let record = CentralRecord(cd, at: position) else {
                throw Refusal("zip-structure", "central directory record \(index) is damaged")
            }
            guard position + record.totalSize <= cd.count else {
                throw Refusal("zip-structure", "central directory record \(index) runs past the directory")
            }
            let nameStart = position + CentralRecord.fixedSize
            let nameBytes = Array(cd[nameStart..<(nameStart + Int(record.nameLength))])
            entries.append(
                Entry(
                    index: index,
                    name: String(validatingUTF8CString: nameBytes) ?? String(decoding: nameBytes, as: UTF8.self),
                    versionMadeBy: record.versionMadeBy, flags: record.flags, method: record.method,
                    crc32: record.crc32, compressedSize: Int64(record.compressedSize),
                    uncompressedSize: Int64(record.uncompressedSize), externalAttributes: record.externalAttributes,
                    localHeaderOffset: Int64(record.localHeaderOffset),
                    centralRecord: Array(cd[position..<(position + record.totalSize)])))
            position += record.totalSize
        }
        guard position == cd.count else {
            return (
                entries,
                [.error("zip-structure", "-", "\(cd.count - position) unexplained bytes in the central directory")]
            )
        }
        return (entries, [])
    }

    /// Per-entry rules (method, path, type and mode, names, sizes, limits), then
    /// the archive's: total size, file/directory conflicts, order.
    private static func checkEntries(_ entries: [Entry], policy: Policy) -> [Finding] {
        var findings: [Finding] = []
        var names = NameIndex()
        var total: Int64 = 0
        for e in entries {
            findings += methodProblems(e)
            if let (rule, message) = policy.nameProblem(e.name) { findings.append(.error(rule, e.name, message)) }
            findings += modeProblems(e)
            findings += names.add(e)
            findings += sizeProblems(e, policy: policy)
            total += e.uncompressedSize
        }
        if total > policy.maxTotalBytes {
            findings.append(
                .error(
                    "limit-total-size", "-",
                    "declares \(total) bytes in all; \(policy.container) holds at most \(policy.maxTotalBytes)"))
        }
        findings += names.prefixConflicts(entries)
        findings += policy.orderProblems(entries.map(\.name))
        return findings
    }

    private static func methodProblems(_ e: Entry) -> [Finding] {
        if e.isEncrypted { return [.error("zip-encrypted", e.name, "entry is encrypted")] }
        if e.method != 0 && e.method != 8 {
            return [
                .error("zip-method", e.name, "compression method \(e.method); bundles use stored (0) or deflate (8)")
            ]
        }
        return []
    }

    /// Regular files with mode 0644, recorded by a unix host.
    private static func modeProblems(_ e: Entry) -> [Finding] {
        let host = e.versionMadeBy >> 8
        guard host == 3 else {
            return [
                .error("zip-entry-mode", e.name, "no unix mode recorded (made by host \(host)); bundles record 0644")
            ]
        }
        let mode = e.externalAttributes >> 16
        switch mode & 0o170000 {
        case 0o100000 where mode & 0o7777 != 0o644:
            return [
                .error("zip-entry-mode", e.name, "mode \(String(mode & 0o7777, radix: 8)); bundle entries are 0644")
            ]
        case 0o100000:
            return []
        case 0o120000:
            return [.error("zip-entry-type", e.name, "entry is a symbolic link; bundles hold regular files only")]
        case 0o040000 where e.name.hasSuffix("/"):
            return []  // the policy's name rules refuse the trailing slash.
        case 0o040000:
            return [.error("zip-entry-type", e.name, "entry is a directory; bundles hold regular files only")]
        default:
            return [
                .error("zip-entry-type", e.name, "entry is a device or special file; bundles hold regular files only")
            ]
        }
    }

    /// Stored sizes agree; declared sizes and ratios within the limits.
    private static func sizeProblems(_ e: Entry, policy: Policy) -> [Finding] {
        var findings: [Finding] = []
        if e.method == 0 && e.compressedSize != e.uncompressedSize {
            findings.append(
                .error("zip-size-mismatch", e.name, "stored entry with different compressed and uncompressed sizes"))
        }
        if e.uncompressedSize > policy.maxEntryBytes {
            findings.append(
                .error(
                    "limit-entry-size", e.name,
                    "declares \(e.uncompressedSize) bytes; an entry holds at most \(policy.maxEntryBytes)"))
        }
        if e.compressedSize > 0, e.uncompressedSize / e.compressedSize > policy.maxCompressionRatio {
            findings.append(
                .error(
                    "limit-compression-ratio", e.name,
                    "declares a compression ratio over \(policy.maxCompressionRatio)"))
        }
        return findings
    }

    /// Every local header agrees with its central record, and the entries tile the
    /// file from offset 0 to the central directory with nothing between them.
    private mutating func checkLayout(file: RandomAccessFile, centralDirectoryOffset: Int64) -> [Finding] {
        var findings: [Finding] = []
        var expectedOffset: Int64 = 0
        for e in entries {
            let dataEnd: Int64
            let mismatches: [String]
            do {
                (dataEnd, mismatches) = try readLocalHeader(of: e, file: file, expectedOffset: expectedOffset)
            } catch {
                return findings + [error.finding]
            }
            if !mismatches.isEmpty {
                findings.append(
                    .error(
                        "zip-local-header-mismatch", e.name,
                        "local header disagrees with the central directory (\(mismatches.joined(separator: ", ")))"))
            }
            if dataEnd > centralDirectoryOffset {
                return findings + [.error("zip-overlap", e.name, "entry data runs into the central directory")]
            }
            expectedOffset = dataEnd
        }
        if expectedOffset != centralDirectoryOffset {
            findings.append(
                .error(
                    "zip-gap", "-",
                    "\(centralDirectoryOffset - expectedOffset) unexplained bytes before the central directory"))
        }
        return findings
    }

    /// Reads the entry's local header (and data descriptor) where the previous
    /// entry ended: where its data ends, and which fields disagree with the
    /// central record.
    private mutating func readLocalHeader(of e: Entry, file: RandomAccessFile, expectedOffset: Int64) throws(Refusal)
        -> (dataEnd: Int64, mismatches: [String])
    {
        if e.localHeaderOffset != expectedOffset {
            let overlap = e.localHeaderOffset < expectedOffset
            let rule = overlap ? "zip-overlap" : "zip-gap"
            let what =
                overlap
                ? "overlaps the entry before it"
                : "leaves \(e.localHeaderOffset - expectedOffset) unexplained bytes before it"
            throw Refusal(rule, at: e.name, "local header at \(e.localHeaderOffset) \(what)")
        }
        guard let fixed = try? file.read(at: e.localHeaderOffset, count: LocalHeader.fixedSize),
            let local = LocalHeader(fixed)
        else {
            throw Refusal("zip-local-header", at: e.name, "no local header at offset \(e.localHeaderOffset)")
        }
        let variable = Int(local.nameLength) + Int(local.extraLength)
        let nameAndExtra =
            (try? file.read(at: e.localHeaderOffset + Int64(LocalHeader.fixedSize), count: variable)) ?? []
        localHeaders[e.index] = fixed + nameAndExtra
        var mismatches: [String] = []
        if String(decoding: nameAndExtra.prefix(Int(local.nameLength)), as: UTF8.self) != e.name {
            mismatches.append("name")
        }
        if local.flags != e.flags { mismatches.append("flags") }
        if local.method != e.method { mismatches.append("method") }
        var dataEnd = e.localHeaderOffset + Int64(local.totalSize) + e.compressedSize
        if local.flags & ZipFlag.dataDescriptor != 0 {
            // Sizes follow the data in a descriptor; the local fields may be zero.
            if local.crc32 != 0 && local.crc32 != e.crc32 { mismatches.append("crc32") }
            if local.compressedSize != 0 && Int64(local.compressedSize) != e.compressedSize {
                mismatches.append("compressed size")
            }
            if local.uncompressedSize != 0 && Int64(local.uncompressedSize) != e.uncompressedSize {
                mismatches.append("size")
            }
            guard let bytes = try? file.read(at: dataEnd, count: 16), bytes.count >= 12 else {
                throw Refusal("zip-truncated", at: e.name, "data descriptor missing")
            }
            let size = DataDescriptor.size(of: bytes)
            descriptors[e.index] = Array(bytes.prefix(size))
            let descriptor = DataDescriptor(bytes)
            if descriptor?.crc32 != e.crc32 || descriptor.map({ Int64($0.compressedSize) }) != e.compressedSize
                || descriptor.map({ Int64($0.uncompressedSize) }) != e.uncompressedSize
            {
                mismatches.append("data descriptor")
            }
            dataEnd += Int64(size)
        } else {
            if local.crc32 != e.crc32 { mismatches.append("crc32") }
            if Int64(local.compressedSize) != e.compressedSize { mismatches.append("compressed size") }
            if Int64(local.uncompressedSize) != e.uncompressedSize { mismatches.append("size") }
        }
        return (dataEnd, mismatches)
    }

    /// Every header byte as fpctl's writer (`ZipWriter`, from the same field lists) produces it
    /// for this `created_at`: nothing in a bundle may vary without breaking the
    /// canonical form, so no byte can be changed unnoticed (timestamps, attributes,
    /// extra fields, versions). Returns the entries that differ.
    func canonicalHeaderProblems(createdAt: Date) -> [Finding] {
        guard let (dosDate, dosTime) = ZipDate.dos(createdAt) else {
            // The manifest parser refuses such a created_at; never trap on one that slips by.
            return [.error("manifest-field", "manifest.json#/created_at", "outside the zip date range 1980-2107")]
        }
        let extra = CanonicalHeader.extraFields(createdAt: createdAt)
        var findings: [Finding] = []
        let extraLength = CanonicalHeader.length(of: extra)
        for e in entries {
            let name = Array(e.name.utf8)
            let canonical = CanonicalHeader.Entry(
                name: name, method: e.method, crc32: e.crc32,
                compressedSize: UInt32(truncatingIfNeeded: e.compressedSize),
                size: UInt32(truncatingIfNeeded: e.uncompressedSize),
                localHeaderOffset: UInt32(truncatingIfNeeded: e.localHeaderOffset))
            let dos = (date: dosDate, time: dosTime)
            let local = CanonicalHeader.localHeader(canonical, dos: dos, extraLength: extraLength)
            let central = CanonicalHeader.centralRecord(canonical, dos: dos, extraLength: extraLength)
            let descriptor = CanonicalHeader.dataDescriptor(canonical)
            var problems: [String] = []
            if let p = CanonicalHeader.difference(
                "local header", fixed: local, name: name, extra: extra, actual: localHeaders[e.index] ?? [])
            {
                problems.append(p)
            }
            if let p = CanonicalHeader.difference(
                "central record", fixed: central, name: name, extra: extra, actual: e.centralRecord)
            {
                problems.append(p)
            }
            if let p = CanonicalHeader.difference(
                "data descriptor", fixed: descriptor, name: nil, extra: nil, actual: descriptors[e.index] ?? [])
            {
                problems.append(p)
            }
            if !problems.isEmpty {
                findings.append(.error("zip-noncanonical-header", e.name, problems.joined(separator: "; ")))
            }
        }
        return findings
    }

    /// What a non-zip file most likely is, for the error message.
    private static func sniff(_ head: [UInt8]) -> String {
        if head.starts(with: [0x1F, 0x8B]) { return "looks like gzip" }
        if head.starts(with: [0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C]) { return "looks like 7z" }
        if head.starts(with: Array("BZh".utf8)) { return "looks like bzip2" }
        if head.starts(with: [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00]) { return "looks like xz" }
        if head.count >= 262, Array(head[257..<262]) == Array("ustar".utf8) { return "looks like tar" }
        if head.starts(with: Array("PK".utf8)) { return "an unusual zip record comes first" }
        return "unrecognized content"
    }

}

extension String {
    /// Exact UTF-8 decoding, nil when the bytes are not valid UTF-8 or hold a NUL.
    fileprivate init?(validatingUTF8CString bytes: [UInt8]) {
        guard !bytes.contains(0), let s = String(validating: bytes, as: UTF8.self) else { return nil }
        self = s
    }
}

/// Entry names seen so far: exact duplicates, names that differ only in case,
/// and paths that are both a file and a directory.
private struct NameIndex {
    private var exact: [String: Int] = [:]
    private var folded: [String: String] = [:]

    func index(of name: String) -> Int? { exact[name] }

    mutating func add(_ e: ZipDirectory.Entry) -> [Finding] {
        if let first = exact[e.name] { return [.error("zip-duplicate-path", e.name, "same path as entry \(first)")] }
        exact[e.name] = e.index
        let key = e.name.lowercased()
        if let other = folded[key] {
            return [.error("zip-case-collision", e.name, "differs only in case from \(other)")]
        }
        folded[key] = e.name
        return []
    }

    func prefixConflicts(_ entries: [ZipDirectory.Entry]) -> [Finding] {
        entries.compactMap { e in
            var prefix = Substring(e.name)
            while let slash = prefix.lastIndex(of: "/") {
                prefix = prefix[..<slash]
                if exact[String(prefix)] != nil {
                    return .error("zip-prefix-conflict", e.name, "\(prefix) is both a file and a directory")
                }
            }
            return nil
        }
    }
}
