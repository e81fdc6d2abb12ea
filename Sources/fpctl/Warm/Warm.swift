import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
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
            JSON Lines of {"user_id", "attributes"}, streamed. A repeat of one of
            the last 49,152 distinct identities is skipped; one further back is
            looked up again (a fresh cache hit: no request, a second row), so
            memory does not grow with the input.
            Prints one row per (identity, placement), then a per-placement summary
            (identities; warmed by delivery_source; no_flow; failed by error code;
            media_warmed %; resolve p50/p95/p99 ms; a TOTAL row): after the table
            when more than one identity was warmed, in the JSON document always
            (with the run: run_id, shard, placements, started_at, ended_at, which
            fpctl report reads), and alone with --summary.
            CSV carries the rows only, or the summary only with --summary.
            A line of counts goes to standard error, with a progress line while it
            runs on a terminal.
            Only validated flows are cached.
            A cache write that fails (disk full, read-only directory, file size
            limit) makes the row failed, with error cache-write naming the errno;
            no identity starts after it, and the run exits 73.
            --concurrency is lowered, once, on stderr, to what the open-files
            limit (ulimit -n) holds.
            --metrics-file writes Prometheus metrics at the end, atomically, for
            node_exporter's textfile collector.
            SIGTERM or SIGINT stops it cleanly: no new identity starts, those in
            flight get up to 10 s to finish, then their rows and the JSON's last
            line are written and synced, and it exits 75; a second signal ends it
            at once. Other commands end at once, removing their temporary files.
            Exit status: 0 all warmed or no flow, 3 some failed (see --fail-on),
            69 no request reached the backend (unreachable, tls or proxy errors;
            one line on stderr says why), 75 stopped by a signal, 64 bad options,
            65 invalid input (--resume's file, or an identities line: read ahead,
            it ends the run once the identities before it are warmed), 66 a
            missing input, 73 the cache, the metrics file or --output-dir cannot be
            written.
            Retry 1, 3, 69 and 75 (with --resume PREVIOUS.json or --output-dir,
            only what earlier attempts did not warm is tried again); 64, 65, 66
            and 73 fail the same way every time (deploy/kubernetes has an Indexed
            Job whose podFailurePolicy acts on it).
            Example, one pod of a Kubernetes Indexed Job of 4 (JOB_COMPLETION_INDEX
            0..3; docs/fleet.md), then the summary of every shard and attempt:
              fpctl warm onboarding paywall --identities ids.jsonl \\
                --shard job/4 --run-id warm-20261125 --output-dir /results
              fpctl report /results/warm-20261125
            """
    )

    @Argument(help: "Placement keys to warm.") var placements: [String]
    @OptionGroup var backend: BackendOptions
    @Option(help: "JSON Lines identities file, or - for standard input.") var identities: String?
    @Option(help: "Images to warm.") var media: MediaStrategy = .firstScreen
    @Option(
        parsing: .unconditional,
        help: """
            Identities resolving at once, each with its one batch request in flight (HTTP/1.1: as many \
            connections per host; HTTP/2: streams, within the server's limit). One whose answer came gives \
            its place to the next while its flows are written and committed: at most twice this many in flight \
            (with 1: one at a time, rows in input order).
            """)
    var concurrency = WarmLimits.defaultConcurrency
    @Option(
        name: .customLong("media-concurrency"), parsing: .unconditional,
        help: "Image and font downloads at once, the image cache's concurrency cap, apart from --concurrency.")
    var mediaConcurrency = WarmLimits.defaultConcurrency
    @Option(
        help: """
            Requests per second across the whole run, retries and media included: N, N/s or N/m. \
            A Retry-After from the backend holds back every request, with or without it.
            """)
    var rate: RequestPacer.Rate?
    @Option(
        name: .customLong("shard"),
        help: """
            Only shard K of N (e.g. 2/4), a stable split of the identities; job/N takes K from a Kubernetes \
            Indexed Job's JOB_COMPLETION_INDEX (0-based: K is the index plus 1).
            """)
    var shardArgument: ShardArgument?
    @Option(
        name: .customLong("output-dir"),
        help: """
            Write the JSON output, rows and all, to a new file per attempt, DIR/RUN_ID/PART.attempt-NNN.json \
            (PART shard-K-of-N or all), resuming from the earlier attempts there; standard output gets the \
            summary alone. Needs --run-id.
            """)
    var outputDir: String?
    @Option(parsing: .unconditional, help: "How long to wait for resolves that outlived their timeout.")
    var grace = DurationArgument(WarmLimits.defaultGrace)
    @Option(name: .customLong("fail-on"), help: "Which outcomes make the exit status 3.")
    var failOn: WarmRun.FailOn = .failed
    @Flag(name: .customLong("no-caching"), help: "Caching disabled: warm does nothing, and says so.")
    var noCaching = false
    @Flag(help: "Print only the per-placement summary, not one row per (identity, placement).") var summary = false
    @Option(
        name: .customLong("run-id"),
        help: "Names the run in the JSON output; give every shard of one run the same id (default: a random UUID).")
    var runID: String?
    @Option(
        name: .customLong("metrics-file"),
        help: "Write the run's metrics here in the Prometheus text format, atomically, when it ends.")
    var metricsFile: String?
    @Option(
        help: """
            The JSON output of an earlier attempt of this run, killed or failed: its warmed and no-flow \
            pairs are not tried again, its failed ones are. The new output names it, so fpctl report \
            merges the two.
            """)
    var resume: String?
    @OptionGroup var output: FormatOption<OutcomeReport>

    /// Identities or downloads at once: enough for any backend, and never a
    /// connection count that overflows.
    static let concurrencyRange = 1...10_000

    func validate() throws {
        try checkRange("--concurrency", concurrency, Self.concurrencyRange)
        try checkRange("--media-concurrency", mediaConcurrency, Self.concurrencyRange)
        try grace.check("--grace", from: DurationArgument("0s", seconds: 0), to: DurationArgument("1h", seconds: 3600))
        if let runID, runID.isEmpty { throw ValidationError("--run-id must not be empty") }
        if identities != nil, !backend.remote.userID.isEmpty || !backend.remote.attributes.isEmpty {
            throw ValidationError(
                "--user-id and --attribute name one identity, --identities many: give one or the other")
        }
        if outputDir != nil {
            guard let runID else {
                throw ValidationError("--output-dir needs --run-id: a retried attempt finds the earlier ones by it")
            }
            if resume != nil {
                throw ValidationError("--output-dir resumes from the earlier attempts it holds; leave out --resume")
            }
            if noCaching { throw ValidationError("--output-dir has nothing to write with --no-caching") }
            if let problem = WarmAttempts.runIDProblem(runID) { throw ValidationError(problem) }
        }
    }

    func run() async throws {
        if noCaching {
            Console.warn("caching is disabled (--no-caching): prefetch is a no-op, nothing was warmed")
            return
        }
        let prepared = try prepare()
        let startedAt = Date()
        let identities = prepared.identities
        let presentation = WarmPresentation(
            format: output.format, rows: !summary, metrics: prepared.metricsOutput != nil,
            attempt: prepared.attempt, fraction: { identities?.fraction })
        if let attempt = prepared.attempt {
            Console.note("attempt \(attempt.number): \(attempt.path)")
        }
        // SIGTERM or SIGINT: no new identity starts, those in flight get
        // WarmRun.Options.stopTimeout, then the rows and the JSON's last line
        // are written and synced as at any end (status 75). A second signal
        // ends fpctl at once (Signals).
        let stop = StopRequest()
        let stopTimeout = prepared.run.options.stopTimeout
        let onTerminal = isatty(STDERR_FILENO) != 0
        Signals.onFirst { number in
            // On a terminal the progress line is cleared first, so the note starts at the margin.
            Console.raw(
                (onTerminal ? "\r\u{1B}[2K" : "") + "fpctl: \(Signals.name(number)): stopping: no new identities, "
                    + "those in flight get up to \(stopTimeout.components.seconds)s; a second signal ends fpctl at once\n"
            )
            stop.request()
        }
        let result: WarmRun.Summary
        if let file = prepared.identities {
            result = try await prepared.run.run(file, stop: stop, onIdentity: presentation.record)
        } else {
            let one = AsyncStream<Identity> { continuation in
                continuation.yield(prepared.single)
                continuation.finish()
            }
            result = try await prepared.run.run(one, stop: stop, onIdentity: presentation.record)
        }
        let previous = prepared.run.options.resume?.previous
        let run = WarmRunInfo(
            runID: previous?.run?.runID ?? runID ?? UUID().uuidString.lowercased(), shard: prepared.run.options.shard,
            placements: prepared.run.options.placements, startedAt: startedAt, endedAt: Date(),
            resumedFrom: previous.map { WarmRunInfo.ResumedFrom(rows: $0.rows, sha256: $0.sha256) })
        let verdict = result.verdict(failOn: failOn)
        presentation.finish(run: run, result: result, warmer: prepared.run.warmer, success: verdict == nil)
        try presentation.writeMetrics(to: prepared.metricsOutput, warmer: prepared.run.warmer, endedAt: run.endedAt)
        if let verdict { throw verdict }
    }

    /// What a run needs, checked before the cache is touched: the earlier
    /// attempt, the identities, the metrics file's directory, the backend.
    struct Prepared {
        let run: WarmRun
        let single: Identity
        let identities: IdentityLines?
        let metricsOutput: AtomicFile.Output?
        /// `--output-dir`'s file for this attempt.
        let attempt: WarmAttempts?
    }

    func prepare() throws -> Prepared {
        // Every limit of the run decided once, in the core; the open-files fit is said once, on stderr.
        let limits = WarmLimits(
            concurrency: concurrency, mediaConcurrency: mediaConcurrency, grace: grace.duration,
            placements: Set(placements.map { ExactName($0) }).count, batch: !backend.noBatch,
            freeDescriptors: Platform.freeDescriptors(),
            openFileLimit: Platform.openFileLimit())
        if let lowered = limits.lowered { Console.warn(lowered.message) }
        var options = WarmRun.Options(placements: placements, limits: limits)
        let shard = try shardArgument?.resolve()
        options.shard = shard
        options.resume = try resume.map { try resumed([$0], options.placements, shard) }
        let file = try identities.map(IdentityLines.init(path:))
        let metricsOutput = try metricsFile.map { try AtomicFile.Output(destination: $0, overwrite: true) }
        // The client (with the connections the limits keep in flight) before the cache is opened.
        let client = try limits.client(for: backend.remote.backend(retries: backend.retries, rate: rate))
        var configuration = try backend.configuration(media: media)
        limits.configure(&configuration)
        let store = try backend.cache.openMigrating()
        let bundle = try backend.loadBundle()
        let single = try backend.identity()
        // Last, once everything else is checked: the attempt's file is created here.
        var attempt: WarmAttempts?
        if let outputDir, let runID {
            let placements = options.placements
            (attempt, options.resume) = try WarmAttempts.claim(outputDir: outputDir, runID: runID, shard: shard) {
                earlier in try earlier.isEmpty ? nil : resumed(earlier, placements, shard)
            }
        }
        return Prepared(
            run: WarmRun(
                warmer: Warmer(client: client, store: store, bundle: bundle, config: configuration), options: options),
            single: single, identities: file,
            metricsOutput: metricsOutput, attempt: attempt)
    }

    /// The earlier attempts `--resume` or `--output-dir` name, checked against
    /// this run's placements, shard and `--run-id`.
    func resumed(_ paths: [String], _ placements: [String], _ shard: Shard?) throws -> WarmResume {
        let resume = try WarmResume.read(paths, placements: placements, shard: shard, runID: runID)
        Console.note(
            "resuming \(paths.joined(separator: ", ")): \(resume.kept) pairs warmed or without a flow there, \(resume.retried) failed ones tried again"
        )
        return resume
    }

    /// `warmed 3, no flow 0, failed 1 in 0.42s`, the late resolves if any, and
    /// the rate limit with the time requests waited for their slots.
    static func summaryLine(_ summary: WarmRun.Summary, pacer: RequestPacer) -> String {
        let seconds = Double(summary.elapsed.components.seconds) + Double(summary.elapsed.components.attoseconds) / 1e18
        let counts = summary.counts
        var line =
            "warmed \(counts.warmed), no flow \(counts.noFlow), failed \(counts.failed) in \(String(format: "%.2f", seconds))s"
        if summary.stopped {
            line += "; stopped by a signal"
            if summary.abandoned > 0 {
                line += ", \(summary.abandoned) identities still in flight left for a resumed attempt"
            }
        }
        let late = summary.late
        if late != LateResolves() {
            line += "; \(late.landed) late resolves landed in the cache after their timeout, \(late.failed) failed, "
            if late.noFlow > 0 { line += "\(late.noFlow) answered without a flow, " }
            line += "\(late.pending) still pending"
        }
        let waited = pacer.waited
        if pacer.rate != nil || waited >= .milliseconds(5) {
            let seconds = Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18
            line +=
                "; rate limit \(pacer.rate?.description ?? "none"), requests waited \(String(format: "%.2f", seconds))s in all for their turn"
        }
        return line
    }
}
