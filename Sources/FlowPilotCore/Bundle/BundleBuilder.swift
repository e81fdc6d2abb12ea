import Crypto
import Foundation

/// Builds the canonical `.fpbundle` (README "Bundle sources"; man fpctl.bundle.build) from a source directory.
public enum BundleBuilder {
    public struct Options: Sendable {
        public var overwrite = false
        /// `SOURCE_DATE_EPOCH`, when the caller's environment sets it.
        public var sourceDateEpoch: String?
        public var generator = "fpctl \(FPVersion.current)"
        /// Runs between planning and writing; tests change sources there.
        var beforeWriting: (@Sendable () -> Void)?
        /// The time the build takes as now when it decides whether a source file
        /// is old enough to trust its stamp; nil: the clock. Tests move it past
        /// `FileStamp.racyWindow` instead of waiting.
        var stampTime: Date?
        public init(overwrite: Bool = false, sourceDateEpoch: String? = nil) {
            self.overwrite = overwrite
            self.sourceDateEpoch = sourceDateEpoch
        }
    }

    public struct Result: Sendable {
        public let output: String
        public let digest: String
        public let manifest: BundleManifest
        /// Warnings met on the way (e.g. assets no flow references, left out).
        public let warnings: [Finding]
        public let bytesWritten: Int64
    }

    /// The age-unknown timestamp: 1980-01-01T00:00:00Z, the earliest a zip can hold.
    public static let unknownCreatedAt = Date(timeIntervalSince1970: ZipDate.range.lowerBound)

    /// A source directory checked against every rule, before a byte is
    /// written: its findings (each about a file of the source, with the line
    /// and column of the value it names), the files checked, and what a build
    /// writes when there are no errors.
    public struct SourceCheck {
        /// The directory as the caller named it.
        public let directory: String
        public let findings: [Finding]
        /// The source files read, relative to `directory`: bundle.json, the
        /// flows, the images and fonts they reference.
        public let checkedFiles: [String]
        /// The regular files of the source, relative to `directory`, among those
        /// checked or named by a finding: a report places a finding at its file
        /// only when the file is there (a missing flow's finding goes to
        /// bundle.json, which names it). Found when the source is checked, so
        /// rendering a report reads nothing.
        public let presentFiles: Set<String>
        fileprivate let plan: BundlePlan?

        fileprivate init(directory: String, findings: [Finding], checkedFiles: [String], plan: BundlePlan?) {
            (self.directory, self.findings, self.checkedFiles, self.plan) = (directory, findings, checkedFiles, plan)
            var named = Set(checkedFiles)
            for f in findings where !f.file.isEmpty && f.file != "-" { named.insert(String(f.file)) }
            presentFiles = named.filter { name in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: "\(directory)/\(name)", isDirectory: &isDirectory)
                    && !isDirectory.boolValue
            }
        }

        public var isValid: Bool { !findings.hasErrors }
        /// The source as bundle.json describes it, when it could be read.
        public var source: BundleSource? { plan?.source }
        /// Placement key -> its flow, for the flows that are valid.
        public var flows: [String: FlowDocument] { plan?.documents ?? [:] }
    }

    /// Reads and checks a source directory (`SourceCheck`). Throws
    /// `FPError.inputMissing` when it is not there; every problem of its
    /// content is a finding.
    public static func check(sourceDirectory: String, options: Options = .init()) throws -> SourceCheck {
        let (loaded, sourceFindings) = try BundleSource.load(sourceDirectory)
        guard let source = loaded else {
            // Without bundle.json's placements there is nothing else to read: say so once.
            var findings = sourceFindings
            findings.append(
                .warning(
                    "rule-not-run", BundleSource.fileName,
                    "no flow, image or font was checked: bundle.json names no placement to read them from; "
                        + "fix its errors and they are"))
            return SourceCheck(
                directory: sourceDirectory, findings: findings, checkedFiles: [BundleSource.fileName], plan: nil)
        }
        var plan = BundlePlan(source: source, findings: sourceFindings)
        plan.addFlows()
        plan.addAssets(stampTime: options.stampTime)
        try BundleLimits.check(sizes: plan.files.map { ($0.archivePath, $0.size) }, findings: &plan.findings)
        plan.locateSourceFindings()
        return SourceCheck(
            directory: sourceDirectory, findings: plan.findings, checkedFiles: plan.checkedFiles, plan: plan)
    }

    public static func build(sourceDirectory: String, output: String, options: Options = .init()) throws -> Result {
        try build(check(sourceDirectory: sourceDirectory, options: options), output: output, options: options)
    }

    /// Writes the bundle of a checked source; a source with errors is
    /// `FPError.invalid`, and nothing is written.
    public static func build(_ check: SourceCheck, output: String, options: Options = .init()) throws -> Result {
        guard let plan = check.plan, check.isValid else { throw FPError.invalid(check.findings) }
        let createdAt = try resolveCreatedAt(source: plan.source, options: options)
        let manifest = plan.manifest(generator: options.generator, createdAt: createdAt)
        let manifestData = manifest.data
        options.beforeWriting?()
        let out = try AtomicFile.Output(destination: output, overwrite: options.overwrite)
        try write(manifestData, plan.files, to: out, createdAt: createdAt)
        try out.commit()
        let written = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int64) ?? 0
        return Result(
            output: output, digest: Digest.sha256Hex(manifestData), manifest: manifest,
            warnings: plan.findings.filter { $0.severity == .warning }, bytesWritten: written)
    }

    /// Writes the archive in canonical order, every timestamp `createdAt`. A file
    /// changed since planning fails the build instead of producing a lying
    /// manifest: its stamp (inode, size, times) must be the one it had when it
    /// was hashed, before and after it is streamed; a file too recently changed
    /// for its stamp to tell (`FileStamp`) is hashed again as it is written, on
    /// a second core.
    private static func write(
        _ manifestData: Data, _ files: [BundlePlan.File], to out: AtomicFile.Output, createdAt: Date
    ) throws {
        let rehash = HashPipeline()
        var streamed: [(id: Int, file: BundlePlan.File)] = []
        let buffer = ReadBuffer(size: chunkSize)
        do {
            let writer = try ZipWriter(output: out, modified: createdAt)
            try writer.addFile(path: BundleManifest.path, size: Int64(manifestData.count), store: false) {
                sink in
                try manifestData.withUnsafeBytes { try sink($0) }
            }
            for file in files.sorted(by: { $0.archivePath.utf8.lexicographicallyPrecedes($1.archivePath.utf8) }) {
                try writer.addFile(
                    path: file.archivePath, size: file.size, store: BundlePath.isStored(file.archivePath)
                ) { sink in
                    switch file.content {
                    case .bytes(let data): try data.withUnsafeBytes { try sink($0) }
                    case .file(let url, let stamp):
                        let id = streamed.count
                        if stamp == nil { streamed.append((id, file)) }
                        try streamFile(
                            url, stamp: stamp, archivePath: file.archivePath, rehash: (id, rehash), buffer: buffer,
                            into: sink)
                    }
                }
            }
            try writer.close()
        } catch let error as ArchiveError {
            throw FPError.cannotWrite("\(out.destination): \(error.message)")
        }
        let rehashed = rehash.drain()
        for (id, file) in streamed where rehashed[id] != file.sha256 {
            throw changed(file.archivePath)
        }
    }

    static func changed(_ archivePath: String) -> FPError {
        FPError.cannotWrite("\(archivePath): its source changed while the bundle was being built; nothing was written")
    }

    static func resolveCreatedAt(source: BundleSource, options: Options) throws -> Date {
        if let epoch = options.sourceDateEpoch, !epoch.isEmpty {
            guard let seconds = Int64(epoch), ZipDate.range.contains(TimeInterval(seconds)) else {
                throw FPError.usage(
                    "SOURCE_DATE_EPOCH=\(epoch): must be whole seconds between 1980 and 2107 (the zip date range)")
            }
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        if let created = source.createdAt {
            // Zip dates have a 2-second resolution and start in 1980; keep the manifest honest about that.
            let seconds = max(Int64(ZipDate.range.lowerBound), Int64(created.timeIntervalSince1970))
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        return unknownCreatedAt
    }

    private static let chunkSize = 1 << 20

    /// A file's size, SHA-256, first bytes (for `MediaType`), and its stamp
    /// when it was not racy and did not change while it was read.
    struct FileDigest: Sendable {
        let size: Int64
        let sha256: String
        let head: [UInt8]
        let stamp: FileStamp?
        /// What `MediaStructure` found wrong, for a media or font file.
        var structureProblem: String?
    }

    static func hashFile(_ url: URL, buffer: ReadBuffer, now: Date? = nil) throws -> FileDigest {
        let fd = try ReadBuffer.openForReading(url.path)
        defer { close(fd) }
        let before = FileStamp.stamp(fd, now: now ?? Date())
        var hasher = SHA256()
        var size: Int64 = 0
        var head: [UInt8] = []
        var structure = MediaStructure(path: url.path)
        try buffer.forEachBlock(of: fd, path: url.path) { block in
            if head.count < MediaType.headSize { head += block.prefix(MediaType.headSize - head.count) }
            hasher.update(bufferPointer: block)
            structure?.update(block)
            size += Int64(block.count)
        }
        let stamp = before.flatMap { FileStamp(fd: fd) == $0 ? $0 : nil }
        return FileDigest(
            size: size, sha256: Digest.hex(hasher.finalize()), head: head, stamp: stamp,
            structureProblem: structure?.finish())
    }

    /// Hashes files on every core (one read buffer per slice); a file that
    /// cannot be read is absent from the result.
    static func hashFiles(_ urls: [URL], now: Date? = nil) -> [String: FileDigest] {
        let slices = Parallel.mapSlices(urls, minimumPerSlice: 1) { slice in
            let buffer = ReadBuffer()
            return slice.map { try? hashFile($0, buffer: buffer, now: now) }
        }
        var out: [String: FileDigest] = [:]
        for (url, digest) in zip(urls, slices.joined()) { if let digest { out[url.path] = digest } }
        return out
    }

    /// Streams a source file into the archive. With a stamp, the file must carry
    /// it before and after (it is as it was hashed); without one (racy), every
    /// block goes to the `rehash` pipeline too, under `id`.
    private static func streamFile(
        _ url: URL, stamp: FileStamp?, archivePath: String, rehash: (id: Int, pipeline: HashPipeline),
        buffer: ReadBuffer, into sink: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let fd = try ReadBuffer.openForReading(url.path)
        defer { close(fd) }
        func checkStamp() throws {
            if let stamp, FileStamp(fd: fd) != stamp { throw changed(archivePath) }
        }
        try checkStamp()
        try buffer.forEachBlock(of: fd, path: url.path) { block in
            if stamp == nil { rehash.pipeline.update(rehash.id, block) }
            try sink(block)
        }
        try checkStamp()
        if stamp == nil { rehash.pipeline.finish(rehash.id) }
    }
}
