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
    private let progress: Progress
    private lazy var rowsOnTerminal = report.showRows && isatty(STDOUT_FILENO) != 0
    private var placementSummary = OutcomeSummary()
    private let metrics: WarmMetrics?

    /// `fraction`: the share of the input done, when it is known.
    init(
        format: OutputFormat, rows: Bool, metrics: Bool, attempt: WarmAttempts?, fraction: @escaping () -> Double?
    ) {
        progress = Progress(enabled: isatty(STDERR_FILENO) != 0, fraction: fraction)
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
