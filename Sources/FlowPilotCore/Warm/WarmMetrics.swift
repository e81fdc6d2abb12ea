import Foundation
import Prometheus

/// A warm run's metrics in the Prometheus text format, written at the end of a
/// run for node_exporter's textfile collector (the convention for batch jobs):
/// outcomes and failures per placement, resolve latency as a histogram, HTTP
/// requests by endpoint and status, and when the run last ended and whether it
/// succeeded. Built on swift-prometheus's registry, which writes the format.
public final class WarmMetrics: Sendable {
    // The descriptors are computed: swift-prometheus's MetricNameDescriptor is not Sendable.
    private let registry = PrometheusCollectorRegistry()
    private let duration: DurationHistogram

    /// `fpctl_warm_<name>_<unit>` with its HELP text.
    private static func metric(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "fpctl", subsystem: "warm", metricName: name, unitName: unit, helpText: help)
    }

    private static var outcomes: MetricNameDescriptor {
        metric("outcomes", "total", "PrefetchOutcomes by placement, state and delivery_source (none unless warmed).")
    }
    private static var failures: MetricNameDescriptor {
        metric("failures", "total", "Failed PrefetchOutcomes by placement and error code.")
    }
    private static var resolveDuration: MetricNameDescriptor {
        metric(
            "resolve_duration", "seconds", "Time from the start of an identity's prefetch to each placement's outcome.")
    }
    private static var requests: MetricNameDescriptor {
        metric(
            "requests", "total",
            "HTTP requests by endpoint (resolve, resolve-batch, media) and status (error: no response).")
    }
    private static var rateLimit: MetricNameDescriptor {
        metric(
            "rate_limit", "requests_per_second",
            "The run's request rate limit, in requests per second (absent without one).")
    }
    private static var rateWait: MetricNameDescriptor {
        metric(
            "rate_wait", "seconds",
            "Time requests waited for their turn (the rate limit, Retry-After pauses), added up over requests.")
    }
    private static var lastRun: MetricNameDescriptor {
        metric("last_run_timestamp", "seconds", "When the last warm run ended, in seconds since 1970.")
    }
    private static var lastSuccess: MetricNameDescriptor {
        metric("last_run", "success", "1 when the last warm run exited 0, else 0.")
    }

    static let buckets: [Duration] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000].map {
        .milliseconds($0)
    }

    public init() {
        duration = registry.makeDurationHistogram(descriptor: Self.resolveDuration, labels: [], buckets: Self.buckets)
    }

    public func record(_ outcome: PrefetchOutcome) {
        let source = outcome.deliverySource?.rawValue ?? "none"
        registry.makeCounter(
            descriptor: Self.outcomes,
            labels: [("placement", outcome.placement), ("state", outcome.state.rawValue), ("delivery_source", source)]
        ).increment()
        if let code = outcome.errorCode {
            registry.makeCounter(
                descriptor: Self.failures, labels: [("placement", outcome.placement), ("error", code)]
            )
            .increment()
        }
        duration.record(.milliseconds(outcome.milliseconds))
    }

    /// The whole text, once the run is over: `requests` from the run's
    /// `RequestCounts`, the rate limit and waits from its `RequestPacer`.
    public func text(requests: [RequestCounts.Key: Int], pacer: RequestPacer, endedAt: Date, success: Bool) -> [UInt8] {
        for (key, count) in requests {
            let counter = registry.makeCounter(
                descriptor: Self.requests, labels: [("endpoint", key.endpoint), ("status", key.status)])
            counter.reset()
            counter.increment(by: Int64(count))
        }
        if let rate = pacer.rate {
            registry.makeGauge(descriptor: Self.rateLimit, labels: []).set(to: rate.perSecond)
        }
        let waited = pacer.waited.components
        registry.makeGauge(descriptor: Self.rateWait, labels: []).set(
            to: Double(waited.seconds) + Double(waited.attoseconds) / 1e18)
        registry.makeGauge(descriptor: Self.lastRun, labels: []).set(to: endedAt.timeIntervalSince1970)
        registry.makeGauge(descriptor: Self.lastSuccess, labels: []).set(to: success ? 1 : 0)
        var text = registry.emitToBuffer()
        if text.last != 0x0A { text.append(0x0A) }  // the format ends every line, the last one too
        return text
    }
}
