import FlowPilotCore
import FlowPilotOutput
import Foundation

/// What a person or a pipeline sees of a warm while it runs and when it ends:
/// rows and the summary on standard output, progress and the closing line on
/// standard error, and the metrics file.
final class WarmPresentation {
    private let report: OutcomeReport
    /// `--output-dir`'s attempt file: the JSON document, rows and all, while
    /// standard output gets the summary alone.
    private let attempt: (report: OutcomeReport, file: BufferedOutput)?
    private let progress: WarmProgress
    private lazy var rowsOnTerminal = report.showRows && isatty(STDOUT_FILENO) != 0
    private var placementSummary = OutcomeSummary()
    private let metrics: WarmMetrics?

    /// `fraction`: the share of the input done, when it is known.
    init(
        format: OutputFormat, rows: Bool, metrics: Bool, attempt: WarmAttempts?, fraction: @escaping () -> Double?
    ) {
        progress = WarmProgress(enabled: isatty(STDERR_FILENO) != 0, fraction: fraction)
        if let attempt {
            let file = BufferedOutput.file(attempt.descriptor, path: attempt.path)
            self.attempt = (OutcomeReport(format: .json, rows: true, to: file), file)
            report = OutcomeReport(format: format, rows: false, to: BufferedOutput())
        } else {
            self.attempt = nil
            report = OutcomeReport(format: format, rows: rows, to: BufferedOutput())
        }
        self.metrics = metrics ? WarmMetrics() : nil
    }

    /// One identity's outcomes, as it finishes.
    func record(_ outcomes: [PrefetchOutcome], _ counts: WarmRun.Counts) {
        for outcome in outcomes {
            report.add(outcome)
            attempt?.report.add(outcome)
            placementSummary.add(outcome)
            metrics?.record(outcome)
        }
        // Rows on the terminal the progress line is on start at the margin.
        if rowsOnTerminal { progress.clear() }
        report.identityDone()
        attempt?.report.identityDone()
        progress.update(counts)
    }

    /// The summary and the run on standard output (synced when it is a file),
    /// then the closing line, and why nothing reached the backend if so.
    func finish(run: WarmRunInfo, result: WarmRun.Summary, warmer: Warmer, success: Bool) {
        progress.clear()
        if let attempt {
            attempt.report.finish(run: run, summary: placementSummary, identities: result.counts.identities)
            attempt.file.close()
        }
        report.finish(run: run, summary: placementSummary, identities: result.counts.identities)
        StandardOutputSync.sync()
        Console.note(Warm.summaryLine(result, pacer: warmer.pacer))
        switch result.verdict(failOn: .never) {
        case .unavailable: Console.error(result.reach.explanation)
        // 73 says why on its own line, naming the path and the cause, whatever the rows went to.
        case .unchecked(let error): Console.error(error.description)
        default: break
        }
        succeeded = success
    }

    private var succeeded = false

    /// The Prometheus metrics, written whole to `output` when there is one.
    func writeMetrics(to output: AtomicFile.Output?, warmer: Warmer, endedAt: Date) throws {
        guard let metrics, let output else { return }
        try output.write(
            metrics.text(
                requests: warmer.requests.snapshot, pacer: warmer.pacer, endedAt: endedAt, success: succeeded))
        try output.commit()
    }
}

/// A one-line progress counter on standard error, only when it is a terminal,
/// redrawn at most five times a second. The rate is over the last few seconds
/// (a window of samples), never over less than one: a first second's 65 rows
/// read as 65,000/s, and a rate since the start hides a run slowing down. When
/// the identities come from a file, its size makes the run's share known
/// (`fraction`: the bytes of the lines read): the line starts with the
/// percentage, and after a second ends with the time left at the recent
/// pace. It is cleared before anything else reaches the terminal (`clear`).
final class WarmProgress {
    let enabled: Bool
    /// The share of the input done, 0 to 1, when it is known.
    let fraction: () -> Double?
    private var shown = false
    private var last = ContinuousClock.now
    private let start = ContinuousClock.now
    /// (seconds since start, identities) at each redraw, the last five seconds' worth.
    private var samples: [(Double, Int)] = [(0, 0)]

    init(enabled: Bool, fraction: @escaping () -> Double? = { nil }) {
        self.enabled = enabled
        self.fraction = fraction
    }

    func update(_ counts: WarmRun.Counts) {
        let now = ContinuousClock.now
        guard enabled, now - last > .milliseconds(200) else { return }
        last = now
        let elapsed = now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        samples.append((seconds, counts.identities))
        while samples.count > 2, seconds - samples[1].0 >= 5 { samples.removeFirst() }
        let done = fraction()
        var line = "\r\u{1B}[2K"
        if let done { line += "\(Int((done * 100).rounded(.down)))% " }
        line += "\(counts.identities) identities, \(counts.warmed) warmed, \(counts.failed) failed"
        if let first = samples.first, seconds - first.0 >= 1 {
            let rate = Double(counts.identities - first.1) / (seconds - first.0)
            line += ", \(Int(rate.rounded()))/s"
            // The time left at the window's pace: the identities still to come
            // are those done so far times what is left of the input over its share done.
            if let done, done > 0, rate > 0 {
                let left = Double(counts.identities) * (1 - done) / done / rate
                line += ", \(Self.duration(left)) left"
            }
        }
        Console.raw(line)
        shown = true
    }

    /// `42s`, `3m05s`, `2h07m`.
    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m\(String(format: "%02d", s % 60))s" }
        return "\(s / 3600)h\(String(format: "%02d", s % 3600 / 60))m"
    }

    /// Takes the line away, so that rows or the summary start at the margin;
    /// the next `update` draws it again.
    func clear() {
        guard enabled && shown else { return }
        Console.raw("\r\u{1B}[2K")
        shown = false
    }
}
