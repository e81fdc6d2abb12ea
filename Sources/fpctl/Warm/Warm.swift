import ArgumentParser
import FlowPilotCore
import Foundation

struct Warm: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "warm",
        abstract: "Prefetch placements into a cache directory and print each PrefetchOutcome",
        discussion: """
            Walks the SDK's chain for every (identity, placement): fresh cache, live
            resolve (one resolve-batch request per identity for two or more
            placements), stale cache, bundled default.
            One identity from --user-id and --attribute, or many from --identities,
            JSON Lines of {"user_id", "attributes"}, streamed.
            Prints one row per (identity, placement) and a summary on standard error,
            with a progress line while it runs when standard error is a terminal.
            Exit status: 0 all warmed or no flow, 3 some failed (see --fail-on),
            69 the backend was unreachable for every request, 64 bad options.
            """
    )

    @Argument(help: "Placement keys to warm.") var placements: [String]
    @OptionGroup var backend: BackendOptions
    @Option(help: "JSON Lines identities file, or - for standard input.") var identities: String?
    @Option(help: "Images to warm: none, first-screen or all-screens.") var media: String = "first-screen"
    @Option(help: "Identities warmed at once.") var concurrency = 8
    @Option(help: "Only shard K of N (e.g. 2/4), a stable split of the identities.") var shard: String?
    @Option(help: "How long to wait for resolves that outlived their timeout.") var grace: String = "10s"
    @Option(name: .customLong("fail-on"), help: "Exit 3 on: failed, no-flow or never.") var failOn: String = "failed"
    @Flag(name: .customLong("no-caching"), help: "Caching disabled: warm does nothing, and says so.") var noCaching = false
    @OptionGroup var output: FormatOption

    func run() async throws {
        if noCaching {
            Console.warn("caching is disabled (--no-caching): prefetch is a no-op, nothing was warmed")
            return
        }
        let (warmer, shardSpec, graceSeconds) = try reportingErrors { () -> (Warmer, (Int, Int)?, Double) in
            guard let strategy = MediaStrategy(rawValue: media) else { throw FPError.usage("--media \(media): use none, first-screen or all-screens") }
            guard ["failed", "no-flow", "never"].contains(failOn) else { throw FPError.usage("--fail-on \(failOn): use failed, no-flow or never") }
            guard let g = Units.parseDuration(grace) else { throw FPError.usage("--grace \(grace): use a duration like 10s") }
            var spec: (Int, Int)?
            if let shard {
                let parts = shard.split(separator: "/").compactMap { Int($0) }
                guard parts.count == 2, parts[1] > 0, (1...parts[1]).contains(parts[0]) else { throw FPError.usage("--shard \(shard): use K/N with 1 <= K <= N") }
                spec = (parts[0], parts[1])
            }
            guard concurrency > 0 else { throw FPError.usage("--concurrency must be at least 1") }
            return (try backend.makeWarmer(media: strategy), spec, g)
        }
        let report = OutcomeReport(format: output.format)
        let progress = Progress(enabled: isatty(STDERR_FILENO) != 0)
        var counts: [PrefetchOutcome.State: Int] = [:]
        let started = ContinuousClock.now
        // Backpressure: the reader thread stays at most 1024 identities ahead of the warmers.
        let window = DispatchSemaphore(value: 1024)
        let stream: AsyncThrowingStream<Identity, Error>
        do { stream = try identityStream(shardSpec, window: window) } catch let e as FPError { Console.error(e.description); throw ExitCode(e.exitCode) }
        func record(_ outcomes: [PrefetchOutcome]) {
            for o in outcomes { counts[o.state, default: 0] += 1; report.add(o) }
            progress.identityDone(counts)
        }
        do {
            try await withThrowingTaskGroup(of: [PrefetchOutcome].self) { group in
                var running = 0
                for try await identity in stream {
                    window.signal()
                    if running >= concurrency, let done = try await group.next() {
                        running -= 1
                        record(done)
                    }
                    group.addTask { await warmer.prefetch(placements, for: identity) }
                    running += 1
                }
                for try await done in group { record(done) }
            }
        } catch let e as FPError {
            Console.error(e.description)
            throw ExitCode(e.exitCode)
        }
        report.finish()
        progress.clear()
        let (landed, pending) = await warmer.waitForLateResolves(grace: .milliseconds(Int(graceSeconds * 1000)))
        let seconds = Double(Warmer.ms(since: started)) / 1000
        Console.note("warmed \(counts[.warmed] ?? 0), no flow \(counts[.no_flow] ?? 0), failed \(counts[.failed] ?? 0) in \(String(format: "%.2f", seconds))s"
            + (landed + pending > 0 ? "; \(landed) late resolves landed in the cache after their timeout, \(pending) still pending" : ""))
        let requests = await warmer.liveRequests, unreachable = await warmer.unreachable
        if requests > 0 && unreachable == requests && (counts[.warmed] ?? 0) == 0 { throw ExitCode(69) }
        let failed = (counts[.failed] ?? 0) > 0, noFlow = (counts[.no_flow] ?? 0) > 0
        if (failOn == "failed" && failed) || (failOn == "no-flow" && (failed || noFlow)) { throw ExitCode(3) }
    }

    /// Identities from the options or the JSON Lines file, de-duplicated, sharded.
    private func identityStream(_ shard: (Int, Int)?, window: DispatchSemaphore) throws -> AsyncThrowingStream<Identity, Error> {
        let single = try backend.identity()
        let source = identities
        let handle: FileHandle? = try source.map { path in
            if path == "-" { return FileHandle.standardInput }
            guard let h = FileHandle(forReadingAtPath: path) else { throw FPError.inputMissing("\(path): no such identities file") }
            return h
        }
        return AsyncThrowingStream { continuation in
            let thread = Thread {
                var seen = Set<String>()
                func emit(_ identity: Identity) {
                    let fp = identity.fingerprint
                    if let (k, n) = shard, Int(UInt64(fp.prefix(15), radix: 16)! % UInt64(n)) != k - 1 { return }
                    // Bounded: remember fingerprints only up to a million, then rely on the cache's own de-duplication.
                    if seen.count < 1_000_000, !seen.insert(fp).inserted { return }
                    window.wait()
                    continuation.yield(identity)
                }
                guard let handle else {
                    emit(single)
                    continuation.finish()
                    return
                }
                do {
                    try JSONLines.forEach(handle) { line, json in
                        guard let user = json["user_id"]?.stringValue else {
                            throw FPError.invalid([.error("identity", "\(source!):\(line)", "each line needs a string user_id")])
                        }
                        emit(Identity(userID: user, attributes: json["attributes"]?.objectValue ?? [:]))
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            thread.start()
        }
    }
}

/// A one-line progress counter on standard error, only when it is a terminal,
/// redrawn at most five times a second.
final class Progress {
    let enabled: Bool
    private var identities = 0
    private var last = ContinuousClock.now
    private let start = ContinuousClock.now

    init(enabled: Bool) { self.enabled = enabled }

    func identityDone(_ counts: [PrefetchOutcome.State: Int]) {
        identities += 1
        guard enabled, ContinuousClock.now - last > .milliseconds(200) else { return }
        last = ContinuousClock.now
        let seconds = Double((ContinuousClock.now - start).components.seconds) + 0.001
        let line = "\r\u{1B}[2K\(identities) identities, \(counts[.warmed] ?? 0) warmed, \(counts[.failed] ?? 0) failed, \(Int(Double(identities) / seconds))/s"
        FileHandle.standardError.write(Data(line.utf8))
    }

    func clear() {
        if enabled && identities > 0 { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }
}
