/// Warm's limits, decided once (docs/decisions.md, "Warm's flow control"):
/// from what was asked (`--concurrency`, `--media-concurrency`, `--grace`)
/// and what the process may hold open, every limit a run keeps, each part
/// taking its own from here: the loop (`WarmRun.Options.limits`: identities
/// resolving and in flight), the HTTP client's pool (`client(for:)`:
/// `connections`) and the downloads (`configure(_:)`: the media limiter's
/// size, and the grace). The open-files fit and what it lowered are data
/// (`lowered`), which the executable only prints.
public struct WarmLimits: Sendable, Equatable {
    /// Identities resolving at once (`--concurrency`, after the fit).
    public let concurrency: Int
    /// Image and font downloads at once (`--media-concurrency`, after the fit).
    public let mediaConcurrency: Int
    /// How long the end of a run waits for late resolves and fonts, and past
    /// `--timeout` a row waits for its images (`--grace`).
    public let grace: Duration
    /// Distinct placements per identity.
    public let placements: Int
    /// Whether the backend is asked in batches (`--no-batch` says no).
    public let batch: Bool
    /// What the open-files limit lowered, if it did.
    public let lowered: Lowered?

    /// The default of `--grace`.
    public static let defaultGrace: Duration = .seconds(10)

    /// The default of `--concurrency` and of `--media-concurrency`.
    public static let defaultConcurrency = 8
    /// What one image or font download holds at once: its connection, the
    /// file it streams into, and, while that file is named, the cache's lock.
    public static let perDownload = 3

    /// Asked limits lowered to fit `freeDescriptors` (`Platform.freeDescriptors`;
    /// nil: no fit): `concurrency` first, then `mediaConcurrency`, never below 1.
    /// With `ulimit -n 64` a warm runs a few identities at a time instead of
    /// failing rows with EMFILE after their requests were sent.
    public init(
        concurrency: Int = WarmLimits.defaultConcurrency, mediaConcurrency: Int = WarmLimits.defaultConcurrency,
        grace: Duration = WarmLimits.defaultGrace, placements: Int, batch: Bool = true, freeDescriptors: Int? = nil,
        openFileLimit: Int? = nil
    ) {
        let placements = max(1, placements)
        var fitted = max(1, concurrency)
        var media = max(1, mediaConcurrency)
        if let available = freeDescriptors {
            func needed() -> Int {
                Self.descriptors(concurrency: fitted, mediaConcurrency: media, placements: placements, batch: batch)
            }
            while fitted > 1, needed() > available {
                // A large step first, then one at a time near the fit.
                fitted = max(1, fitted - max(1, (needed() - available) / (3 * placements + 2)))
            }
            while media > 1, needed() > available { media -= 1 }
        }
        self.concurrency = fitted
        self.mediaConcurrency = media
        self.grace = grace
        self.placements = placements
        self.batch = batch
        lowered =
            fitted < concurrency || media < mediaConcurrency
            ? Lowered(
                concurrency: concurrency, mediaConcurrency: mediaConcurrency, toConcurrency: fitted,
                toMediaConcurrency: media, openFileLimit: openFileLimit)
            : nil
    }

    /// What the fit lowered, and why: the warning a run prints once.
    public struct Lowered: Sendable, Equatable {
        public let concurrency: Int
        public let mediaConcurrency: Int
        public let toConcurrency: Int
        public let toMediaConcurrency: Int
        public let openFileLimit: Int?

        /// `--concurrency lowered from 14 to 2: the open-files limit (ulimit -n) is 64`.
        public var message: String {
            "--concurrency lowered from \(concurrency) to \(toConcurrency)"
                + (toMediaConcurrency < mediaConcurrency
                    ? " and --media-concurrency from \(mediaConcurrency) to \(toMediaConcurrency)" : "")
                + ": the open-files limit (ulimit -n) is \(openFileLimit ?? 0)"
        }
    }

    /// Identities started and not yet handed on, at most: those resolving
    /// and as many again waiting for their group commit. Except at
    /// `concurrency` 1, which keeps one identity at a time, commit
    /// included, so that its rows come in input order (two identities
    /// told by one commit could otherwise be handed on either way round).
    public var maxInFlight: Int { Self.maxInFlight(concurrency: concurrency) }

    static func maxInFlight(concurrency: Int) -> Int { concurrency == 1 ? 1 : 2 * concurrency }

    /// The HTTP connections a run needs to one backend host so that no
    /// request waits for one: each identity in flight has one batch
    /// request, or, when the backend has no batch endpoint (found out
    /// during the run, or `--no-batch`), one request per placement; plus
    /// the media downloads. A pool only opens connections as requests need
    /// them, so a backend with batches still uses `concurrency`.
    public var connections: Int { concurrency * placements + mediaConcurrency }

    /// The file descriptors a run holds at most.
    public var descriptors: Int {
        Self.descriptors(
            concurrency: concurrency, mediaConcurrency: mediaConcurrency, placements: placements, batch: batch)
    }

    /// Each identity in flight (`maxInFlight`) one staged file per
    /// placement until its group commit and the cache's lock; a socket per
    /// identity resolving (one per placement without batches); per media
    /// download `perDownload`.
    static func descriptors(concurrency: Int, mediaConcurrency: Int, placements: Int, batch: Bool) -> Int {
        maxInFlight(concurrency: concurrency) * (placements + 1) + concurrency * (batch ? 1 : placements)
            + mediaConcurrency * perDownload
    }

    /// The client a run with these limits needs to reach `backend`: as many
    /// HTTP connections per host as it keeps requests in flight (`connections`).
    public func client(for backend: ResolveBackend) throws -> ResolveClient {
        try backend.client(connections: connections)
    }

    /// The downloads' share: the media limiter's size and the grace a row's
    /// images get past `--timeout`. (Whether to batch is the configuration's
    /// own, from the same flag: `--no-batch`.)
    public func configure(_ configuration: inout WarmConfiguration) {
        configuration.mediaConcurrency = mediaConcurrency
        configuration.mediaGrace = grace
    }
}
