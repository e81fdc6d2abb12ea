import Foundation
import NIOCore
import Synchronization

/// One cached image as its name and stat describe it.
public struct CachedImage: Sendable {
    public let urlHash: String
    public let downloadedAt: Date
    /// The access time the cache records itself (the file's mtime, set on every hit).
    public let lastAccess: Date
    public let size: Int64
    public let path: String

    public func isExpired(at now: Date, ttl: TimeInterval) -> Bool { now.timeIntervalSince(downloadedAt) >= ttl }

    /// The full URL the image was stored under, from the `url` file beside it
    /// (docs/cache-format.md); nil when that file is missing.
    public var url: String? {
        let sidecar = PathName.parent(of: path) + "/" + CacheStore.imageURLFileName
        return FileManager.default.contents(atPath: sidecar).map { String(decoding: $0, as: UTF8.self) }
    }
}

extension CacheStore {
    /// The file beside an image's bytes that holds its full URL.
    static let imageURLFileName = "url"

    static func urlHash(_ url: String) -> String { Digest.sha256Hex(Data(url.utf8)) }

    func imageDir(_ url: String) -> String { "\(imagesDir)/\(Self.urlHash(url))" }

    /// Stores an image under its full URL. An image larger than the disk budget is
    /// refused (returns false). After the write the image budget holds: least
    /// recently used images, across the whole cache, go first.
    @discardableResult
    public func storeImage(url: String, data: Data, now: Date = Date()) throws -> Bool {
        guard Int64(data.count) <= budgets.imageDiskBytes else { return false }
        let dir = imageDir(url)
        let name = CacheNames.stamp(now) + ".img"
        try withLock(exclusive: false) {
            Self.publishURLFile(url, in: dir, now: now)
            try AtomicFile.publish(data, directory: dir, name: name, mtime: now)
            Self.removeOlderImages(in: dir, keeping: name)
        }
        try enforceImageBudget(adding: Int64(data.count), now: now)
        imageMemory.insert(url, data, budget: budgets.imageMemoryBytes)
        return true
    }

    /// An image being downloaded straight into the cache (`storeImage(url:writer:)`).
    public func imageWriter() throws -> ImageWriter {
        try AtomicFile.makeDirectory(imagesDir)
        return ImageWriter(try AtomicFile.openUnnamed(directory: imagesDir, target: imagesDir))
    }

    /// Gives a streamed image its name, as `storeImage(url:data:)` does for
    /// bytes in memory: synced, named under the shared lock, the URL's older
    /// copies removed, the budget kept. False when it is larger than the
    /// disk budget. The writer is spent either way.
    @discardableResult
    public func storeImage(url: String, writer: ImageWriter, now: Date = Date()) throws -> Bool {
        guard writer.size <= budgets.imageDiskBytes else {
            writer.discard()
            return false
        }
        if let problem = writer.problem
            ?? (writer.size < MediaType.headSize ? "\(writer.size) bytes: not an image" : nil)
        {
            writer.discard()
            throw FPError.cannotWrite("\(url): \(problem)")
        }
        let dir = imageDir(url)
        let name = CacheNames.stamp(now) + ".img"
        defer { writer.discard() }
        try withLock(exclusive: false) {
            try AtomicFile.makeDirectory(dir)
            Self.publishURLFile(url, in: dir, now: now)
            AtomicFile.setTimes(fd: writer.file.descriptor, mtime: now)
            guard Platform.syncData(writer.file.descriptor) else {
                throw FPError.cannotWrite("\(dir)/\(name): \(Errno.describe(errno))")
            }
            guard AtomicFile.giveName(writer.file, to: "\(dir)/\(name)") else {
                throw FPError.cannotWrite("\(dir)/\(name): \(Errno.describe(errno))")
            }
            writer.named = true
            try AtomicFile.syncDirectory(dir)
            Self.removeOlderImages(in: dir, keeping: name)
        }
        try enforceImageBudget(adding: writer.size, now: now)
        return true
    }

    /// The URL beside an image's bytes, so `cache list --images` can show it (once a URL).
    private static func publishURLFile(_ url: String, in dir: String, now: Date) {
        if !FileManager.default.fileExists(atPath: "\(dir)/\(imageURLFileName)") {
            try? AtomicFile.publish(Data(url.utf8), directory: dir, name: imageURLFileName, mtime: now)
        }
    }

    /// A URL's older copies: a newer one is another writer's, just made durable (`removeOlder`).
    private static func removeOlderImages(in dir: String, keeping name: String) {
        for item in published(dir) where item.name < name && item.name.hasSuffix(".img") {
            unlink("\(dir)/\(item.name)")
        }
    }

    /// The newest copy of the URL's image when it has not expired.
    private func freshImagePath(_ url: String, now: Date) -> String? {
        guard let newest = Self.published(imageDir(url)).last(where: { $0.name.hasSuffix(".img") }),
            let downloaded = CacheNames.parseStamp(newest.name.prefix(14)),
            now.timeIntervalSince(downloaded) < budgets.imageTTL
        else { return nil }
        return "\(imageDir(url))/\(newest.name)"
    }

    /// The image's bytes when cached and not expired; records the access.
    public func image(url: String, now: Date = Date()) -> Data? {
        guard let path = freshImagePath(url, now: now) else { return nil }
        let data = imageMemory.get(url) ?? FileManager.default.contents(atPath: path)
        guard let data else { return nil }
        AtomicFile.touch(path, now)
        imageMemory.insert(url, data, budget: budgets.imageMemoryBytes)
        return data
    }

    /// Whether a fresh copy is cached, without reading it or recording an access.
    public func hasImage(url: String, now: Date = Date()) -> Bool {
        freshImagePath(url, now: now) != nil
    }

    /// The newest copy of every cached image, from one walk of `images/`
    /// (the same walk `scan()` makes).
    public func scanImages() -> [CachedImage] {
        var scan = CacheScan()
        scanImageDirs(into: &scan)
        return scan.images
    }

    /// Keeps the on-disk image total within budget, the whole volume's: the
    /// total is measured by a walk of `images/` at the first write, then
    /// after every 32 writes or a second, whichever comes first
    /// (`ImageTally`), and kept up to date by this process's writes between;
    /// so other writers' images count, at the cost of one walk a second at
    /// most. When a write takes it over the budget, a global LRU sweep (one
    /// more walk) trims to 90% of it, so sweeps are rare.
    func enforceImageBudget(adding bytes: Int64, now: Date) throws {
        // The walk, when one is due, outside the tally's lock: this process's other writers go on.
        let disk = imageTotal.withLock { $0.stale } ? scanImages().reduce(0) { $0 + $1.size } : nil
        let over = imageTotal.withLock { tally -> Bool in
            if let disk {
                // The disk as it is now, this write included (it is already named).
                tally.measured(disk)
            } else {
                tally.total = (tally.total ?? 0) + bytes
                tally.writesSinceMeasure += 1
            }
            return (tally.total ?? 0) > budgets.imageDiskBytes
        }
        guard over else { return }
        let target = budgets.imageDiskBytes * 9 / 10
        try withLock(exclusive: true, checked: false) {
            let images = scanImages().sorted { $0.lastAccess < $1.lastAccess }
            var total = images.reduce(0) { $0 + $1.size }
            for image in images where total > target {
                unlink(image.path)
                Self.removeImageDirIfEmpty(image.path)
                total -= image.size
            }
            imageTotal.withLock { $0.measured(total) }
        }
    }

    static func removeImageDirIfEmpty(_ imagePath: String) {
        let dir = PathName.parent(of: imagePath)
        if !published(dir).contains(where: { $0.name.hasSuffix(".img") }) {
            unlink("\(dir)/\(Self.imageURLFileName)")
            rmdir(dir)
        }
    }

    // MARK: Fonts

    /// Stores a font by its SHA-256 (checked); content-addressed, so storing twice is a no-op.
    public func storeFont(_ data: Data, sha256 expected: String?, ext: String) throws -> String {
        let sha = Digest.sha256Hex(data)
        if let expected, expected != sha {
            throw FPError.cannotWrite("font sha256 \(sha) does not match the flow's \(expected)")
        }
        let name = "\(sha).\(BundlePath.normalizedExtension("x.\(ext)"))"
        if !FileManager.default.fileExists(atPath: "\(fontsDir)/\(name)") {
            try withLock(exclusive: false) {
                do { try AtomicFile.publish(data, directory: fontsDir, name: name) } catch {
                    if !FileManager.default.fileExists(atPath: "\(fontsDir)/\(name)") { throw error }
                }
            }
        }
        return "\(fontsDir)/\(name)"
    }

    public func hasFont(sha256: String) -> Bool {
        (DirectoryWalker.list(fontsDir, stat: false) ?? []).contains { $0.name.hasPrefix(sha256 + ".") }
    }
}

/// An image's bytes written to an unnamed file in the cache as they arrive
/// (`CacheStore.imageWriter`): its first bytes must show an image or a video
/// (PNG, JPEG, GIF, WebP, MP4), so an HTML page a captive portal or a CDN's
/// error answers with is never cached as an image.
public final class ImageWriter: @unchecked Sendable {
    let file: AtomicFile.Unnamed
    private(set) var size: Int64 = 0
    private var head: [UInt8] = []
    /// What is wrong with the bytes so far (not an image), if anything.
    private(set) var problem: String?
    fileprivate var named = false
    private var closed = false

    init(_ file: AtomicFile.Unnamed) { self.file = file }

    static let imageTypes: Set<MediaType> = [.png, .jpeg, .gif, .webp, .mp4]

    /// Appends a chunk; throws once the first bytes show something that is not an image.
    public func write(_ chunk: ByteBuffer) throws {
        try chunk.withUnsafeReadableBytes { bytes in
            if head.count < MediaType.headSize {
                head += bytes.prefix(MediaType.headSize - head.count)
                if head.count >= MediaType.headSize, !(MediaType(sniffing: head).map(Self.imageTypes.contains) ?? false)
                {
                    problem = "not an image or a video (it begins \(Self.describe(head)))"
                    throw FPError.cannotWrite(problem ?? "")
                }
            }
            if let code = writeAll(file.descriptor, bytes) { throw FPError.cannotWrite(Errno.describe(code)) }
        }
        size += Int64(chunk.readableBytes)
    }

    /// The first bytes as text when they are printable, else in hex.
    private static func describe(_ bytes: [UInt8]) -> String {
        if bytes.allSatisfy({ (0x20..<0x7F).contains($0) }) { return "\"\(String(decoding: bytes, as: UTF8.self))\"" }
        return bytes.map { String($0, radix: 16) }.joined(separator: " ")
    }

    /// Closes the file; an image never named leaves nothing behind.
    func discard() {
        guard !closed else { return }
        closed = true
        close(file.descriptor)
        if !named, let temporaryPath = file.temporaryPath { unlink(temporaryPath) }
    }

    deinit { discard() }
}

/// The in-process image layer: an LRU of decoded bytes under its own budget,
/// each image by its URL's bytes, as `images/` names it (`urlHash`).
final class ImageMemoryCache: Sendable {
    private let state = Mutex<(order: [ExactName], items: [ExactName: Data], bytes: Int)>(([], [:], 0))

    func get(_ url: String) -> Data? {
        let key = ExactName(url)
        return state.withLock { s in
            guard let data = s.items[key] else { return nil }
            if let i = s.order.firstIndex(of: key) { s.order.remove(at: i) }
            s.order.append(key)
            return data
        }
    }

    func insert(_ url: String, _ data: Data, budget: Int) {
        guard data.count <= budget else { return }
        let key = ExactName(url)
        state.withLock { s in
            if let old = s.items.updateValue(data, forKey: key) {
                s.bytes -= old.count
                if let i = s.order.firstIndex(of: key) { s.order.remove(at: i) }
            }
            s.order.append(key)
            s.bytes += data.count
            while s.bytes > budget, !s.order.isEmpty {
                let victim = s.order.removeFirst()
                s.bytes -= s.items.removeValue(forKey: victim)?.count ?? 0
            }
        }
    }
}
