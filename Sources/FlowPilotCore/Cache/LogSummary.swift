import Foundation

/// What `cache info` needs of a format-2 log that has not changed since a
/// compaction wrote it (docs/cache-format.md, "The summary"): the counts,
/// bytes and times of each placement's entries, and when each turns fresh
/// and stale, so that `info` answers from one small file where it would
/// read every record (git's `count-objects`; Chromium's simple cache index).
///
/// A compaction leaves one record a key, every one whole, so the sum of what
/// it wrote is what a walk would count. It writes `log/summary.json` after
/// its segments are sealed and the old ones gone, naming each segment and
/// index it leaves with their inode, size and change times. A reader trusts
/// it only while `log/` holds exactly those files, each unchanged: any
/// write (a new writer's segment, a byte flipped in place, a truncation, a
/// repair) changes a name, a size or a change time, and `info` walks the log
/// as before. It never says which record a lookup serves, so nothing is
/// served from it.
///
/// Freshness: an entry of TTL t resolved at r (milliseconds) is fresh at
/// `now` when r - 60 s <= now < r + t (`CachedFlow.isFresh`). Each
/// placement keeps how many entries start (r - 60 s) and end (r + t) in
/// each bucket of `granularity` milliseconds (1 s, coarsened to a minute,
/// an hour, a day while a placement has more than `maxBuckets` buckets), so
/// fresh = starts in buckets before now's - ends in buckets before now's.
/// That is exact when no start or end falls in now's own bucket; when one
/// does, `info` walks the log (a cache at rest has none: its entries turned
/// stale, or will, at other times).
struct LogSummary: Equatable {
    static let fileName = "summary.json"
    static let version = 1
    /// Buckets a placement's histograms hold at most before they coarsen.
    static let maxBuckets = 4096
    /// A compaction writes no summary of more placements than this, or of
    /// more buckets than this in all: what it holds to write one stays small
    /// (a few MiB) whatever the cache, and `info` walks such a log.
    static let maxPlacements = 4096
    static let maxTotalBuckets = 1 << 16
    /// The coarsenings: a second, a minute, an hour, a day.
    static let granularities: [Int64] = [1000, 60_000, 3_600_000, 86_400_000]

    /// A file of `log/` as a compaction left it.
    struct Stamp: Equatable {
        let name: String
        let inode: UInt64
        let size: Int64
        let modified: (Int, Int)
        let changed: (Int, Int)

        static func == (a: Stamp, b: Stamp) -> Bool {
            a.name.sameBytes(as: b.name) && a.inode == b.inode && a.size == b.size && a.modified == b.modified
                && a.changed == b.changed
        }

        /// `name` in `dir` as `lstat` sees it now; nil when it is not a regular file.
        init?(_ dir: String, _ name: String) {
            var info = stat()
            guard lstat("\(dir)/\(name)", &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
            let times = Platform.times(info)
            (self.name, inode, size) = (name, UInt64(info.st_ino), Int64(info.st_size))
            (modified, changed) = (times.modified, times.changed)
        }

        init(name: String, inode: UInt64, size: Int64, modified: (Int, Int), changed: (Int, Int)) {
            (self.name, self.inode, self.size, self.modified, self.changed) = (name, inode, size, modified, changed)
        }
    }

    struct Placement: Equatable {
        var placement: String
        var entries = 0
        var bytes: Int64 = 0
        var oldest = Int64.max
        var newest = Int64.min
        var granularity = LogSummary.granularities[0]
        /// Bucket -> entries whose freshness starts (resolved_at - 60 s) there; entries of TTL 0 are never fresh.
        var starts: [Int64: Int] = [:]
        /// Bucket -> entries whose freshness ends (resolved_at + TTL) there.
        var ends: [Int64: Int] = [:]

        static func == (a: Placement, b: Placement) -> Bool {
            a.placement.sameBytes(as: b.placement) && a.entries == b.entries && a.bytes == b.bytes
                && a.oldest == b.oldest && a.newest == b.newest && a.granularity == b.granularity
                && a.starts == b.starts && a.ends == b.ends
        }

        mutating func add(resolvedAt: Int64, ttlSeconds: UInt32, size: Int64) {
            entries += 1
            bytes += size
            (oldest, newest) = (min(oldest, resolvedAt), max(newest, resolvedAt))
            guard ttlSeconds > 0 else { return }
            starts[LogSummary.bucket(resolvedAt - Int64(CachedFlow.clockSkew * 1000), granularity), default: 0] += 1
            ends[LogSummary.bucket(resolvedAt + Int64(ttlSeconds) * 1000, granularity), default: 0] += 1
            while max(starts.count, ends.count) > LogSummary.maxBuckets,
                let coarser = LogSummary.granularities.first(where: { $0 > granularity })
            {
                func rebucket(_ histogram: [Int64: Int]) -> [Int64: Int] {
                    // Each old bucket lies inside one new one: the granularities divide each other.
                    histogram.reduce(into: [:]) {
                        $0[LogSummary.bucket($1.key * granularity, coarser), default: 0] += $1.value
                    }
                }
                (starts, ends, granularity) = (rebucket(starts), rebucket(ends), coarser)
            }
        }

        /// Entries fresh at `nowMillis`, nil when a start or an end falls in its bucket.
        func fresh(at nowMillis: Int64) -> Int? {
            let here = LogSummary.bucket(nowMillis, granularity)
            guard starts[here] == nil, ends[here] == nil else { return nil }
            let started = starts.reduce(0) { $0 + ($1.key < here ? $1.value : 0) }
            let ended = ends.reduce(0) { $0 + ($1.key < here ? $1.value : 0) }
            return started - ended
        }
    }

    var files: [Stamp]
    var placements: [Placement]
    /// The placements with an alias.
    var aliases: [String]

    /// Floor division: the bucket of a time before 1970 is below zero too.
    static func bucket(_ millis: Int64, _ granularity: Int64) -> Int64 {
        let (q, r) = millis.quotientAndRemainder(dividingBy: granularity)
        return r < 0 ? q - 1 : q
    }
}

extension LogSummary {
    /// The summary's JSON (canonical, integers as digits).
    var json: JSONValue {
        func histogram(_ h: [Int64: Int]) -> JSONValue {
            .array(h.sorted { $0.key < $1.key }.map { .array([.integer($0.key), .integer(Int64($0.value))]) })
        }
        return .object([
            "version": .integer(Int64(Self.version)),
            "files": .array(
                files.map {
                    .object([
                        "name": .string($0.name), "inode": .integer(Int64(bitPattern: $0.inode)),
                        "size": .integer($0.size),
                        "modified": .array([.integer(Int64($0.modified.0)), .integer(Int64($0.modified.1))]),
                        "changed": .array([.integer(Int64($0.changed.0)), .integer(Int64($0.changed.1))]),
                    ])
                }),
            "placements": .array(
                placements.map {
                    .object([
                        "placement": .string($0.placement), "entries": .integer(Int64($0.entries)),
                        "bytes": .integer($0.bytes), "oldest": .integer($0.oldest), "newest": .integer($0.newest),
                        "granularity": .integer($0.granularity), "starts": histogram($0.starts),
                        "ends": histogram($0.ends),
                    ])
                }),
            "aliases": .array(aliases.map(JSONValue.string)),
        ])
    }

    /// The summary `json` holds; nil for anything else (another version, a damaged file).
    init?(json: JSONValue) {
        guard json["version"]?.integerValue == Int64(Self.version), case .array(let files)? = json["files"],
            case .array(let placements)? = json["placements"], case .array(let aliases)? = json["aliases"]
        else { return nil }
        func pair(_ value: JSONValue?) -> (Int, Int)? {
            guard case .array(let two)? = value, two.count == 2, let a = two[0].integerValue,
                let b = two[1].integerValue
            else { return nil }
            return (Int(a), Int(b))
        }
        func histogram(_ value: JSONValue?) -> [Int64: Int]? {
            guard case .array(let rows)? = value else { return nil }
            var out: [Int64: Int] = [:]
            for row in rows {
                guard let (bucket, count) = pair(row), count > 0, out[Int64(bucket)] == nil else { return nil }
                out[Int64(bucket)] = count
            }
            return out
        }
        var stamps: [Stamp] = []
        for file in files {
            guard let name = file["name"]?.stringValue, let inode = file["inode"]?.integerValue,
                let size = file["size"]?.integerValue, let modified = pair(file["modified"]),
                let changed = pair(file["changed"])
            else { return nil }
            stamps.append(
                Stamp(name: name, inode: UInt64(bitPattern: inode), size: size, modified: modified, changed: changed))
        }
        var counted: [Placement] = []
        for item in placements {
            guard let name = item["placement"]?.stringValue, let entries = item["entries"]?.integerValue,
                let bytes = item["bytes"]?.integerValue, let oldest = item["oldest"]?.integerValue,
                let newest = item["newest"]?.integerValue, let granularity = item["granularity"]?.integerValue,
                Self.granularities.contains(granularity), let starts = histogram(item["starts"]),
                let ends = histogram(item["ends"])
            else { return nil }
            counted.append(
                Placement(
                    placement: name, entries: Int(entries), bytes: bytes, oldest: oldest, newest: newest,
                    granularity: granularity, starts: starts, ends: ends))
        }
        let names = aliases.compactMap(\.stringValue)
        guard names.count == aliases.count,
            Set(counted.map { ExactName($0.placement) }).count == counted.count,
            Set(stamps.map { ExactName($0.name) }).count == stamps.count
        else { return nil }
        (self.files, self.placements, self.aliases) = (stamps, counted, names)
    }

    /// The names of the segments and indexes in `log/`: what a summary stamps.
    private static func logFiles(_ log: FlowLog) -> [String] {
        (DirectoryWalker.list(log.logDir, stat: false) ?? []).map(\.name).filter {
            $0.hasSuffix(LogSegment.suffix) || $0.hasSuffix(LogSegment.suffix + LogSegment.indexSuffix)
        }
    }

    /// The summary of `log`, if one is there and `log/` is still exactly what it names.
    static func current(_ log: FlowLog) -> LogSummary? {
        let path = "\(log.logDir)/\(fileName)"
        guard let data = FileManager.default.contents(atPath: path), let json = try? JSONValue.parse(data),
            let summary = LogSummary(json: json)
        else { return nil }
        // Every segment and index there now, and nothing else of the log's: the files it was written for.
        let names = logFiles(log)
        guard names.count == summary.files.count else { return nil }
        let stamps = Dictionary(summary.files.map { (ExactName($0.name), $0) }, uniquingKeysWith: { a, _ in a })
        for name in names {
            guard let stamp = stamps[ExactName(name)], Stamp(log.logDir, name) == stamp else { return nil }
        }
        return summary
    }

    /// Writes the summary of what a compaction left (`files`: the segments
    /// and indexes in `log/`), replacing any; a failure leaves none (the
    /// next `info` walks the log).
    static func write(_ log: FlowLog, placements: [Placement], aliases: [String]) {
        let path = "\(log.logDir)/\(fileName)"
        let names = logFiles(log)
        let stamps = names.compactMap { Stamp(log.logDir, $0) }
        guard stamps.count == names.count else {
            unlink(path)
            return
        }
        let summary = LogSummary(files: stamps, placements: placements, aliases: aliases)
        do {
            try AtomicFile.publish(CanonicalJSON.data(summary.json), directory: log.logDir, name: fileName)
        } catch {
            unlink(path)
        }
    }
}
