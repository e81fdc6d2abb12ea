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
        var isEncrypted: Bool { flags & 0x0001 != 0 || flags & 0x0040 != 0 || method == 99 }
    }

    /// Local header (with name and extra field) and data descriptor bytes, by entry index.
    var localHeaders: [Int: [UInt8]] = [:]
    var descriptors: [Int: [UInt8]] = [:]

    let fileSize: Int64
    var entries: [Entry]

    private static let localSignature: [UInt8] = [0x50, 0x4B, 0x03, 0x04]
    private static let centralSignature: UInt32 = 0x0201_4B50
    private static let endSignature: UInt32 = 0x0605_4B50
    private static let zip64LocatorSignature: UInt32 = 0x0706_4B50
    private static let descriptorSignature: UInt32 = 0x0807_4B50
    private static let maxCentralDirectoryBytes: Int64 = 32 << 20

    /// Reads and cross-checks the structure. `entries` is empty when the file is
    /// not a readable zip; findings say why.
    static func read(_ file: RandomAccessFile) -> (ZipDirectory?, [Finding]) {
        let size = file.size
        guard size > 0 else { return (nil, [.error("not-zip", "-", "empty file")]) }
        let head = (try? file.read(at: 0, count: Int(min(size, 512)))) ?? []
        if Array(head.prefix(4)) != localSignature && Array(head.prefix(4)) != [0x50, 0x4B, 0x05, 0x06] {
            return (nil, [.error("not-zip", "-", "not a zip archive (\(sniff(head)))")])
        }
        guard size >= 22 else {
            return (nil, [.error("zip-truncated", "-", "file ends before the end-of-central-directory record")])
        }

        // The end record: canonical bundles have no comment, so it must be the last 22 bytes.
        let tailCount = Int(min(size, 22 + 65_535 + 20))
        guard let tail = try? file.read(at: size - Int64(tailCount), count: tailCount) else {
            return (nil, [.error("zip-truncated", "-", "cannot read the end of the file")])
        }
        var endAt: Int?
        var i = tail.count - 22
        while i >= 0 {
            if le32(tail, i) == endSignature {
                endAt = i
                break
            }
            i -= 1
        }
        guard let endIndex = endAt else {
            return (nil, [.error("zip-truncated", "-", "no end-of-central-directory record: truncated, or not a zip")])
        }
        let endOffset = size - Int64(tailCount) + Int64(endIndex)
        let commentLength = Int64(le16(tail, endIndex + 20))
        let recordEnd = endOffset + 22 + commentLength
        if recordEnd < size {
            return (nil, [.error("zip-trailing-bytes", "-", "\(size - recordEnd) bytes after the end of the archive")])
        }
        if recordEnd > size {
            return (nil, [.error("zip-truncated", "-", "the end record's comment runs past the end of the file")])
        }
        if commentLength != 0 {
            return (nil, [.error("zip-comment", "-", "archive comment present; a canonical bundle has none")])
        }
        if endIndex >= 20, le32(tail, endIndex - 20) == zip64LocatorSignature {
            return (nil, [.error("zip-zip64", "-", "zip64 records are not used by bundles")])
        }
        let diskNumber = le16(tail, endIndex + 4)
        let cdDisk = le16(tail, endIndex + 6)
        let entriesOnDisk = le16(tail, endIndex + 8)
        let entryCount = le16(tail, endIndex + 10)
        let cdSize = Int64(le32(tail, endIndex + 12))
        let cdOffset = Int64(le32(tail, endIndex + 16))
        if diskNumber != 0 || cdDisk != 0 || entriesOnDisk != entryCount {
            return (nil, [.error("zip-structure", "-", "multi-disk archives are not bundles")])
        }
        if entryCount == 0xFFFF || cdSize == 0xFFFF_FFFF || cdOffset == 0xFFFF_FFFF {
            return (nil, [.error("zip-zip64", "-", "zip64 records are not used by bundles")])
        }
        if Int(entryCount) > BundleLimits.maxEntries {
            return (
                nil,
                [
                    .error(
                        "limit-entries", "-", "\(entryCount) entries; a bundle holds at most \(BundleLimits.maxEntries)"
                    )
                ]
            )
        }
        if cdOffset + cdSize != endOffset {
            return (
                nil,
                [
                    .error(
                        "zip-truncated", "-",
                        "the central directory does not end where the end record begins (truncated or spliced)")
                ]
            )
        }
        if cdSize > maxCentralDirectoryBytes {
            return (
                nil,
                [.error("limit-entries", "-", "central directory of \(cdSize) bytes is larger than any bundle needs")]
            )
        }
        guard let cd = try? file.read(at: cdOffset, count: Int(cdSize)) else {
            return (nil, [.error("zip-truncated", "-", "cannot read the central directory")])
        }

        var findings: [Finding] = []
        var entries: [Entry] = []
        var p = 0
        for index in 0..<Int(entryCount) {
            guard p + 46 <= cd.count, le32(cd, p) == centralSignature else {
                return (nil, [.error("zip-structure", "-", "central directory record \(index) is damaged")])
            }
            let nameLength = Int(le16(cd, p + 28))
            let extraLength = Int(le16(cd, p + 30))
            let commentLen = Int(le16(cd, p + 32))
            guard p + 46 + nameLength + extraLength + commentLen <= cd.count else {
                return (
                    nil, [.error("zip-structure", "-", "central directory record \(index) runs past the directory")]
                )
            }
            let nameBytes = Array(cd[(p + 46)..<(p + 46 + nameLength)])
            let name = String(decoding: nameBytes, as: UTF8.self)
            entries.append(
                Entry(
                    index: index, name: String(validatingUTF8CString: nameBytes) ?? name,
                    versionMadeBy: le16(cd, p + 4), flags: le16(cd, p + 8), method: le16(cd, p + 10),
                    crc32: le32(cd, p + 16), compressedSize: Int64(le32(cd, p + 20)),
                    uncompressedSize: Int64(le32(cd, p + 24)), externalAttributes: le32(cd, p + 38),
                    localHeaderOffset: Int64(le32(cd, p + 42)),
                    centralRecord: Array(cd[p..<(p + 46 + nameLength + extraLength + commentLen)])))
            p += 46 + nameLength + extraLength + commentLen
        }
        if p != cd.count {
            findings.append(.error("zip-structure", "-", "\(cd.count - p) unexplained bytes in the central directory"))
        }

        findings += checkEntries(entries)
        var directory = ZipDirectory(fileSize: size, entries: entries)
        findings += directory.checkLayout(file: file, centralDirectoryOffset: cdOffset)
        return (directory, findings)
    }

    /// Per-entry rules: type, mode, path, encryption, method, names, order, limits.
    private static func checkEntries(_ entries: [Entry]) -> [Finding] {
        var findings: [Finding] = []
        var exact: [String: Int] = [:]
        var folded: [String: String] = [:]
        var total: Int64 = 0
        for e in entries {
            let at = e.name
            if e.isEncrypted {
                findings.append(.error("zip-encrypted", at, "entry is encrypted"))
            } else if e.method != 0 && e.method != 8 {
                findings.append(
                    .error("zip-method", at, "compression method \(e.method); bundles use stored (0) or deflate (8)"))
            }
            if let (rule, message) = BundlePath.problem(e.name) { findings.append(.error(rule, at, message)) }
            if e.versionMadeBy >> 8 != 3 {
                findings.append(
                    .error(
                        "zip-entry-mode", at,
                        "no unix mode recorded (made by host \(e.versionMadeBy >> 8)); bundles record 0644"))
            } else {
                let mode = e.externalAttributes >> 16
                switch mode & 0o170000 {
                case 0o100000:
                    if mode & 0o7777 != 0o644 {
                        findings.append(
                            .error(
                                "zip-entry-mode", at, "mode \(String(mode & 0o7777, radix: 8)); bundle entries are 0644"
                            ))
                    }
                case 0o120000:
                    findings.append(
                        .error("zip-entry-type", at, "entry is a symbolic link; bundles hold regular files only"))
                case 0o040000:
                    if !e.name.hasSuffix("/") {
                        findings.append(
                            .error("zip-entry-type", at, "entry is a directory; bundles hold regular files only"))
                    }
                default:
                    findings.append(
                        .error(
                            "zip-entry-type", at, "entry is a device or special file; bundles hold regular files only"))
                }
            }
            if let first = exact[e.name] {
                findings.append(.error("zip-duplicate-path", at, "same path as entry \(first)"))
            } else {
                exact[e.name] = e.index
                let key = e.name.lowercased()
                if let other = folded[key] {
                    findings.append(.error("zip-case-collision", at, "differs only in case from \(other)"))
                } else {
                    folded[key] = e.name
                }
            }
            if e.method == 0 && e.compressedSize != e.uncompressedSize {
                findings.append(
                    .error("zip-size-mismatch", at, "stored entry with different compressed and uncompressed sizes"))
            }
            if e.uncompressedSize > BundleLimits.maxEntryBytes {
                findings.append(
                    .error(
                        "limit-entry-size", at,
                        "declares \(e.uncompressedSize) bytes; an entry holds at most \(BundleLimits.maxEntryBytes)"))
            }
            if e.compressedSize > 0, e.uncompressedSize / e.compressedSize > BundleLimits.maxCompressionRatio {
                findings.append(
                    .error(
                        "limit-compression-ratio", at,
                        "declares a compression ratio over \(BundleLimits.maxCompressionRatio)"))
            }
            total += e.uncompressedSize
        }
        if total > BundleLimits.maxTotalBytes {
            findings.append(
                .error(
                    "limit-total-size", "-",
                    "declares \(total) bytes in all; a bundle holds at most \(BundleLimits.maxTotalBytes)"))
        }
        for e in entries {
            var prefix = Substring(e.name)
            while let slash = prefix.lastIndex(of: "/") {
                prefix = prefix[..<slash]
                if exact[String(prefix)] != nil {
                    findings.append(.error("zip-prefix-conflict", e.name, "\(prefix) is both a file and a directory"))
                    break
                }
            }
        }
        // Order: manifest.json, then manifest.sig when present, then by UTF-8 bytes.
        if let manifest = exact[BundleManifest.path], manifest != 0 {
            findings.append(
                .error(
                    "manifest-order", BundleManifest.path, "manifest.json is entry \(manifest); it must be the first"))
        } else if exact[BundleManifest.path] == nil {
            findings.append(.error("manifest-missing", BundleManifest.path, "the bundle has no manifest.json"))
        }
        if let sig = exact[BundleManifest.signaturePath], sig != 1 {
            findings.append(
                .error("manifest-order", BundleManifest.signaturePath, "manifest.sig must be the second entry"))
        }
        let rest = entries.filter { $0.name != BundleManifest.path && $0.name != BundleManifest.signaturePath }
        for (a, b) in zip(rest, rest.dropFirst())
        where !a.name.utf8.lexicographicallyPrecedes(b.name.utf8) && a.name != b.name {
            findings.append(.error("zip-order", b.name, "entries are not sorted by path (comes after \(a.name))"))
            break
        }
        return findings
    }

    /// Every local header agrees with its central record, and the entries tile the
    /// file from offset 0 to the central directory with nothing between them.
    private mutating func checkLayout(file: RandomAccessFile, centralDirectoryOffset: Int64) -> [Finding] {
        let le16 = Self.le16
        let le32 = Self.le32
        let localSignature = Self.localSignature
        let descriptorSignature = Self.descriptorSignature
        var findings: [Finding] = []
        var expectedOffset: Int64 = 0
        for e in entries {
            let at = e.name
            if e.localHeaderOffset != expectedOffset {
                let rule = e.localHeaderOffset < expectedOffset ? "zip-overlap" : "zip-gap"
                let what =
                    e.localHeaderOffset < expectedOffset
                    ? "overlaps the entry before it"
                    : "leaves \(e.localHeaderOffset - expectedOffset) unexplained bytes before it"
                findings.append(.error(rule, at, "local header at \(e.localHeaderOffset) \(what)"))
                return findings
            }
            guard let h = try? file.read(at: e.localHeaderOffset, count: 30), h.count == 30,
                Array(h[0..<4]) == localSignature
            else {
                findings.append(.error("zip-local-header", at, "no local header at offset \(e.localHeaderOffset)"))
                return findings
            }
            let nameLength = Int(le16(h, 26))
            let extraLength = Int(le16(h, 28))
            localHeaders[e.index] =
                h + ((try? file.read(at: e.localHeaderOffset + 30, count: nameLength + extraLength)) ?? [])
            let flags = le16(h, 6)
            let method = le16(h, 8)
            let crc = le32(h, 14)
            let csize = Int64(le32(h, 18))
            let usize = Int64(le32(h, 22))
            let localName = (try? file.read(at: e.localHeaderOffset + 30, count: nameLength)) ?? []
            var mismatches: [String] = []
            if String(decoding: localName, as: UTF8.self) != e.name { mismatches.append("name") }
            if flags != e.flags { mismatches.append("flags") }
            if method != e.method { mismatches.append("method") }
            let dataStart = e.localHeaderOffset + 30 + Int64(nameLength) + Int64(extraLength)
            var dataEnd = dataStart + e.compressedSize
            if flags & 0x0008 != 0 {
                // Sizes follow the data in a descriptor; the local fields may be zero.
                if crc != 0 && crc != e.crc32 { mismatches.append("crc32") }
                if csize != 0 && csize != e.compressedSize { mismatches.append("compressed size") }
                if usize != 0 && usize != e.uncompressedSize { mismatches.append("size") }
                guard let d = try? file.read(at: dataEnd, count: 16), d.count >= 12 else {
                    findings.append(.error("zip-truncated", at, "data descriptor missing"))
                    return findings
                }
                let o = le32(d, 0) == descriptorSignature ? 4 : 0
                descriptors[e.index] = Array(d.prefix(o + 12))
                if o + 12 > d.count || le32(d, o) != e.crc32 || Int64(le32(d, o + 4)) != e.compressedSize
                    || Int64(le32(d, o + 8)) != e.uncompressedSize
                {
                    mismatches.append("data descriptor")
                }
                dataEnd += Int64(o + 12)
            } else {
                if crc != e.crc32 { mismatches.append("crc32") }
                if csize != e.compressedSize { mismatches.append("compressed size") }
                if usize != e.uncompressedSize { mismatches.append("size") }
            }
            if !mismatches.isEmpty {
                findings.append(
                    .error(
                        "zip-local-header-mismatch", at,
                        "local header disagrees with the central directory (\(mismatches.joined(separator: ", ")))"))
            }
            if dataEnd > centralDirectoryOffset {
                findings.append(.error("zip-overlap", at, "entry data runs into the central directory"))
                return findings
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

    /// Every header byte as fpctl's writer (libarchive, pinned fields) produces it
    /// for this `created_at`: nothing in a bundle may vary without breaking the
    /// canonical form, so no byte can be changed unnoticed (timestamps, attributes,
    /// extra fields, versions). Returns the entries that differ.
    func canonicalHeaderProblems(createdAt: Date) -> [Finding] {
        var t = time_t(createdAt.timeIntervalSince1970)
        var tm = tm()
        gmtime_r(&t, &tm)
        let dosDate = UInt16((Int(tm.tm_year) + 1900 - 1980) << 9 | Int(tm.tm_mon + 1) << 5 | Int(tm.tm_mday))
        let dosTime = UInt16(Int(tm.tm_hour) << 11 | Int(tm.tm_min) << 5 | Int(tm.tm_sec) / 2)
        func u16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func u32(_ v: UInt32) -> [UInt8] {
            [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)]
        }
        let extra: [UInt8] =
            [0x55, 0x54, 0x05, 0x00, 0x01] + u32(UInt32(truncatingIfNeeded: Int64(createdAt.timeIntervalSince1970)))
            + [0x75, 0x78, 0x0B, 0x00, 0x01, 0x04, 0, 0, 0, 0, 0x04, 0, 0, 0, 0]
        var findings: [Finding] = []
        for e in entries {
            let name = Array(e.name.utf8)
            let stored = e.method == 0
            let needed: UInt16 = stored ? 10 : 20
            let size = u32(UInt32(truncatingIfNeeded: e.uncompressedSize))
            let local =
                Self.localSignature + u16(needed) + u16(0x0008) + u16(e.method) + u16(dosTime) + u16(dosDate)
                + u32(0) + (stored ? size : u32(0)) + size + u16(UInt16(name.count)) + u16(UInt16(extra.count)) + name
                + extra
            let central =
                u32(Self.centralSignature) + u16(0x0300 | needed) + u16(needed) + u16(0x0008) + u16(e.method)
                + u16(dosTime)
                + u16(dosDate) + u32(e.crc32) + u32(UInt32(truncatingIfNeeded: e.compressedSize)) + size
                + u16(UInt16(name.count)) + u16(UInt16(extra.count)) + u16(0) + u16(0) + u16(0) + u32(0o100644 << 16)
                + u32(UInt32(truncatingIfNeeded: e.localHeaderOffset)) + name + extra
            let descriptor =
                u32(Self.descriptorSignature) + u32(e.crc32) + u32(UInt32(truncatingIfNeeded: e.compressedSize)) + size
            var parts: [String] = []
            if localHeaders[e.index] != local { parts.append("local header") }
            if e.centralRecord != central { parts.append("central record") }
            if descriptors[e.index] != descriptor { parts.append("data descriptor") }
            if !parts.isEmpty {
                findings.append(
                    .error(
                        "zip-noncanonical-header", e.name,
                        "\(parts.joined(separator: ", ")) differ from the canonical form (times, attributes, extra fields or versions)"
                    ))
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

    static func le16(_ b: [UInt8], _ i: Int) -> UInt16 { UInt16(b[i]) | UInt16(b[i + 1]) << 8 }
    static func le32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }
}

extension String {
    /// Exact UTF-8 decoding, nil when the bytes are not valid UTF-8 or hold a NUL.
    fileprivate init?(validatingUTF8CString bytes: [UInt8]) {
        guard !bytes.contains(0), let s = String(validating: bytes, as: UTF8.self) else { return nil }
        self = s
    }
}
