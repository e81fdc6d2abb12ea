import AsyncHTTPClient
import Foundation
import Synchronization

/// Images and fonts for warmed flows. One download per URL for the whole run
/// (a failed one is not retried by the next flow that shares it), at most
/// `concurrency` at once, skipping what the cache already holds. Best effort:
/// a failed download never fails a prefetch.
final class MediaWarmer: Sendable {
    let store: CacheStore
    let transport: HTTPTransport
    let log: RequestCounts
    let pacer: RequestPacer
    private let limiter: AsyncLimiter
    // URLs by their bytes (`ExactName`): the cache names an image by its URL's bytes' hash, so two
    // spellings of one path are two images to look for and download, as the SDK asks for them.
    private let downloads = Mutex<[ExactName: Task<Bool, Never>]>([:])
    /// URLs known to be in the cache: found there or stored by this run. A run
    /// checks the disk once per image, not once per flow that shows it.
    private let known = Mutex<Set<ExactName>>([])
    /// Font downloads, which do not hold up an outcome; the run waits for them at the end.
    private let pendingFonts = Mutex<[Task<Bool, Never>]>([])
    /// The fonts (URL and sha256) this run has looked for: each is looked for in
    /// the cache, and its download started, once, not once per flow that uses it.
    private let fontsSeen = Mutex<Set<ExactName>>([])
    /// The flows (by their one encoding, which FlowMemo shares among equal
    /// flows) whose fonts were looked at already, each kept so its identifier
    /// is never another's; up to `FlowMemo.limit`, past which flows are
    /// looked at font by font as before.
    private let flowsSeen = Mutex<[ObjectIdentifier: EncodedFlow]>([:])

    init(store: CacheStore, transport: HTTPTransport, log: RequestCounts, pacer: RequestPacer, concurrency: Int) {
        self.store = store
        self.transport = transport
        self.log = log
        self.pacer = pacer
        self.limiter = AsyncLimiter(limit: concurrency)
    }

    /// Warms the strategy's images of `document`: true when it ran and every one
    /// of them is now cached; false for `.none`, and false when `deadline`
    /// passes first (the downloads go on, each bounded by its own deadline,
    /// and a later identity that shows the same image waits for the same one).
    func warmImages(
        of document: FlowDocument, _ strategy: MediaStrategy, until deadline: ContinuousClock.Instant
    ) async -> Bool {
        let urls: [String]
        switch strategy {
        case .none: return false
        case .firstScreen: urls = document.firstScreenImages
        case .allScreens: urls = document.allImages
        }
        let tasks = urls.filter { !isCached($0) }.map { url in
            once(url) {
                let stored = await self.downloadImage(url)
                if stored { self.known.withLock { _ = $0.insert(ExactName(url)) } }
                return stored
            }
        }
        var all = true
        for task in tasks {
            let left = deadline - .now
            // Awaiting a task cannot time out; its value handed to a `Pending` can.
            guard left > .zero, await Pending.run({ await task.value }).value(within: left) == true else {
                all = false
                continue
            }
        }
        return all
    }

    private func isCached(_ url: String) -> Bool {
        if known.withLock({ $0.contains(ExactName(url)) }) { return true }
        guard store.hasImage(url: url) else { return false }
        known.withLock { _ = $0.insert(ExactName(url)) }
        return true
    }

    /// Starts downloading the fonts of `document` the cache lacks, checked
    /// against their `sha256`, without waiting for them.
    func startFonts(of document: FlowDocument) {
        let first = flowsSeen.withLock { seen in
            let id = ObjectIdentifier(document.encoded)
            guard seen[id] == nil else { return false }
            if seen.count < FlowMemo.limit { seen[id] = document.encoded }
            return true
        }
        guard first else { return }
        for font in document.fonts {
            guard fontsSeen.withLock({ $0.insert(ExactName("\(font.url)\n\(font.sha256 ?? "")")).inserted }),
                !(font.sha256.map(store.hasFont) ?? false)
            else { continue }
            let ext = URL(string: font.url)?.pathExtension ?? "ttf"
            let task = once(font.url) {
                guard let data = await self.download(font.url, limit: Self.fontLimit) else { return false }
                return (try? self.store.storeFont(data, sha256: font.sha256, ext: ext)) != nil
            }
            pendingFonts.withLock { $0.append(task) }
        }
    }

    /// Waits for the font downloads started so far, until `deadline`.
    func waitForFonts(until deadline: ContinuousClock.Instant) async {
        let tasks = pendingFonts.withLock { tasks in
            defer { tasks = [] }
            return tasks
        }
        for task in tasks where deadline > .now {
            // Awaiting a task cannot time out; its value handed to a `Pending` can.
            _ = await Pending.run { await task.value }.value(within: deadline - .now)
        }
    }

    /// The run's one download of `url` (`work` fetches and stores it, and says whether it did).
    private func once(_ url: String, _ work: @escaping @Sendable () async -> Bool) -> Task<Bool, Never> {
        downloads.withLock { downloads in
            if let running = downloads[ExactName(url)] { return running }
            // Unstructured on purpose: one download per URL for every identity that needs it,
            // going on past a row's deadline until its own, so no identity's task may own it.
            let task = Task { await self.limiter.run { await work() } }
            downloads[ExactName(url)] = task
            return task
        }
    }

    /// How long one image or font download may take, head and body.
    static let downloadTimeout: Duration = .seconds(30)
    /// A font larger than this is not one (the largest CJK fonts are about 20 MB).
    static let fontLimit: Int64 = 64 << 20

    /// A plain GET of a font; nil on any failure.
    private func download(_ url: String, limit: Int64) async -> Data? {
        let fetched = await MediaDownload.fetch(
            url, transport: transport, limit: limit, timeout: Self.downloadTimeout, log: log, pacer: pacer)
        if case .success(let data) = fetched { return data }
        return nil
    }

    /// An image streamed into the cache as it arrives (one chunk in memory,
    /// whatever its size), stored only when it came whole and its bytes are
    /// an image or a video; false on any failure, with nothing left behind.
    private func downloadImage(_ url: String) async -> Bool {
        guard let writer = try? store.imageWriter() else { return false }
        let problem = await MediaDownload.stream(
            url, transport: transport, limit: store.budgets.imageDiskBytes, timeout: Self.downloadTimeout, log: log,
            pacer: pacer, into: { try writer.write($0) })
        guard problem == nil, (try? store.storeImage(url: url, writer: writer)) == true else {
            writer.discard()
            return false
        }
        return true
    }
}
