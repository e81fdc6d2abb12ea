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
    private let downloads = Mutex<[String: Task<Bool, Never>]>([:])
    /// URLs known to be in the cache: found there or stored by this run. A run
    /// checks the disk once per image, not once per flow that shows it.
    private let known = Mutex<Set<String>>([])
    /// Font downloads, which do not hold up an outcome; the run waits for them at the end.
    private let pendingFonts = Mutex<[Task<Bool, Never>]>([])
    /// The fonts (URL and sha256) this run has looked for: each is looked for in
    /// the cache, and its download started, once, not once per flow that uses it.
    private let fontsSeen = Mutex<Set<String>>([])

    init(store: CacheStore, transport: HTTPTransport, log: RequestCounts, pacer: RequestPacer, concurrency: Int) {
        self.store = store
        self.transport = transport
        self.log = log
        self.pacer = pacer
        self.limiter = AsyncLimiter(limit: concurrency)
    }

    /// Warms the strategy's images of `document`: true when it ran and every one
    /// of them is now cached; false for `.none`.
    func warmImages(of document: FlowDocument, _ strategy: MediaStrategy) async -> Bool {
        let urls: [String]
        switch strategy {
        case .none: return false
        case .firstScreen: urls = document.firstScreenImages
        case .allScreens: urls = document.allImages
        }
        let tasks = urls.filter { !isCached($0) }.map { url in
            once(url) { data in
                let stored = (try? self.store.storeImage(url: url, data: data)) ?? false
                if stored { self.known.withLock { _ = $0.insert(url) } }
                return stored
            }
        }
        var all = true
        for task in tasks where await !task.value { all = false }
        return all
    }

    private func isCached(_ url: String) -> Bool {
        if known.withLock({ $0.contains(url) }) { return true }
        guard store.hasImage(url: url) else { return false }
        known.withLock { _ = $0.insert(url) }
        return true
    }

    /// Starts downloading the fonts of `document` the cache lacks, checked
    /// against their `sha256`, without waiting for them.
    func startFonts(of document: FlowDocument) {
        for font in document.fonts {
            guard fontsSeen.withLock({ $0.insert("\(font.url)\n\(font.sha256 ?? "")").inserted }),
                !(font.sha256.map(store.hasFont) ?? false)
            else { continue }
            let ext = URL(string: font.url)?.pathExtension ?? "ttf"
            let task = once(font.url) { data in
                (try? self.store.storeFont(data, sha256: font.sha256, ext: ext)) != nil
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

    /// The run's one download of `url`; `keep` stores the bytes and says whether it did.
    private func once(_ url: String, keep: @escaping @Sendable (Data) -> Bool) -> Task<Bool, Never> {
        downloads.withLock { downloads in
            if let running = downloads[url] { return running }
            let task = Task {
                let data = await self.limiter.run { await self.download(url) }
                return data.map(keep) ?? false
            }
            downloads[url] = task
            return task
        }
    }

    /// A plain GET; nil on any failure.
    private func download(_ url: String) async -> Data? {
        let fetched = await MediaDownload.fetch(
            url, transport: transport, limit: store.budgets.imageDiskBytes, timeout: .seconds(10), log: log,
            pacer: pacer)
        if case .success(let data) = fetched { return data }
        return nil
    }
}
