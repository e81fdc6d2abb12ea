import FlowPilotOutput
import Foundation
import Testing

@testable import FlowPilotCore
@testable import FlowPilotServer

/// The numbers docs/serve.md and docs/decisions.md state, read from the
/// code's constants (docs/cache-format.md's are `DocsTruthTests`'s): a change
/// to a limit that leaves its page behind fails here.
/// 1024 as the pages write it: 1,024.
func grouped(_ n: Int) -> String {
    var digits = String(n)
    var out = ""
    while digits.count > 3 {
        out = "," + digits.suffix(3) + out
        digits.removeLast(3)
    }
    return digits + out
}

@Suite("docs/serve.md and docs/decisions.md state the code's numbers")
struct DocsNumbersTests {
    /// A page's words with one space between, so a phrase may wrap, indented or not.
    static func text(_ page: String) throws -> String {
        let raw = try String(contentsOf: Paths.packageRoot.appendingPathComponent(page), encoding: .utf8)
        return raw.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    @Test(
        "each stated number is the code's",
        arguments: [
            ("docs/serve.md", "the rewritten answers kept", "at most \(RewrittenAnswers.maxBases) base URLs"),
            ("docs/serve.md", "the request body limit", "A body over \(ResolveServer.maxBodyBytes >> 10) KiB: 413"),
            ("docs/serve.md", "the request log's buffer", "one \(RequestLogWriter.defaultCapacity >> 10) KiB buffer"),
            (
                "docs/serve.md", "the request log's flush",
                "at least every \(Int(RequestLogWriter.flushInterval * 1000)) ms"
            ),
            (
                "docs/decisions.md", "findings shown per rule and file",
                "a rule prints at most \([Finding].shownPerRuleAndFile)"
            ),
            (
                "docs/decisions.md", "a JSON document's limit",
                "\(BundleLimits.maxJSONBytes >> 20) MiB each (rule `limit-json-size`)"
            ),
            ("docs/decisions.md", "a bundle's limit", "the \(BundleLimits.maxTotalBytes >> 20) MiB limit"),
            (
                "docs/decisions.md", "warm's time for the identities in flight at a stop",
                "\(WarmRun.Options.defaultStopTimeout.components.seconds) seconds for the identities in flight"
            ),
            (
                "docs/decisions.md", "the places a shared resolve's releases are remembered in",
                "releases are remembered in \(InflightPool<Int, Int, Int>.releaseSlots) places by key hash"
            ),
            ("docs/cache-format.md", "a commit's largest group", "(at most \(grouped(GroupCommit.defaultMaxBatch)))"),
            (
                "docs/cache-format.md", "format 2's segment size",
                "once its current one holds \(LogSegment.rollBytes >> 20) MiB"
            ),
            (
                "docs/cache-format.md", "the small segments a finishing writer merges",
                "sees more than \(CacheStore.crowdedSegments) small segments (under \((LogSegment.rollBytes / 2) >> 20) MiB, half a full one"
            ),
            (
                "docs/cache-format.md", "a record's bounds",
                "body is at least \(LogRecord.minimumBodySize) bytes and at most \(LogRecord.maxBodySize >> 20) MiB long"
            ),
            (
                "docs/cache-format.md", "a survey's range of index slots",
                "each range at most \(grouped(LogSurvey.rangeSlots)) slots (\(LogSurvey.slotBytes) bytes each in memory, \((LogSurvey.rangeSlots * LogSurvey.slotBytes) >> 20) MiB)"
            ),
            (
                "docs/cache-format.md", "a survey's prefix table",
                "counted in a table of twice as many places (\(LogSurvey.PrefixCounts.placeBytes) bytes each)"
            ),
            (
                "docs/cache-format.md", "a survey's bit a slot",
                "one bit for every \(LogSurvey.slot) bytes of segment"
            ),
            (
                "docs/cache-format.md", "a survey's sparse repeated records",
                "fewer than one for every \(grouped(LogSurvey.bytesPerWantedRecord)) of its bytes, their offsets kept"
            ),
            (
                "docs/cache-format.md", "a survey's buckets",
                "goes to one of up to \(grouped(WeighedBuckets.maxBuckets)) buckets by its fingerprint's first two bytes, each about \(WeighedBuckets.bucketBytes >> 20) MiB, which wait in \(WeighedBuckets.bufferBytes >> 10) KiB pieces"
            ),
            (
                "docs/cache-format.md", "a listing's sorted batch",
                "sorted in batches of \(grouped(SortedListing.defaultRunLength))"
            ),
            (
                "docs/cache-format.md", "a listing's batches for its rendering thread",
                "go on still encoded, \(grouped(FlowListing.batch)) at a time, to a second thread"
            ),
            (
                "docs/cache-format.md", "a listing's batches waiting",
                "at most \(FlowListing.batchesWaiting) such batch waiting"
            ),
            (
                "docs/bundle-format.md", "the largest signed integer",
                "its lowest value to \(grouped(TrustRoot.largestWhole)) (2^53 - 1"
            ),
            (
                "docs/bundle-format.md", "the signing clock's skew",
                "more than \(Int(SignatureBlock.clockSkew)) seconds after now is `signature-future`"
            ),
            (
                "docs/bundle-format.md", "trust.json's and a key file's size",
                "trust.json is read up to \(grouped(TrustFile.maxFileBytes)) bytes and a key file up to \(grouped(SigningKey.maxFileBytes)) bytes"
            ),
            ("docs/bundle-format.md", "root versions", "hold 1 to \(grouped(TrustFile.maxVersions)) versions"),
            (
                "man/src/fpctl-trust.md", "trust.json's limits",
                "read up to \(TrustFile.maxFileBytes) bytes, holds 1 to \(TrustFile.maxVersions) versions"
            ),
            ("man/src/fpctl-trust.md", "the largest min_sequence", "at most \(TrustRoot.largestWhole); a key file"),
            ("man/src/fpctl-trust.md", "a key file's size", "read up to \(SigningKey.maxFileBytes) bytes"),
            (
                "man/src/fpctl-bundle-sign.md", "the signing clock's skew",
                "more than \(Int(SignatureBlock.clockSkew)) seconds after now"
            ),
            ("man/src/fpctl-bundle-sign.md", "the largest sequence", "a `--sequence` above \(TrustRoot.largestWhole)"),
            (
                "man/src/fpctl-bundle-validate.md", "the signing clock's skew",
                "more than \(Int(SignatureBlock.clockSkew)) seconds after now"
            ),
            (
                "man/src/fpctl-resolve.md", "a one-shot request's connect time",
                "three quarters of `--timeout`, at most \(HTTPTransport.defaultConnectTimeout.components.seconds) seconds"
            ),
            (
                "man/src/fpctl-bundle-pull.md", "a connect attempt's time",
                "attempts of at most \(HTTPTransport.defaultConnectTimeout.components.seconds) seconds each to connect"
            ),
            (
                "man/src/fpctl-cache-list.md", "a listing's sorted batch",
                "more than \(grouped(SortedListing.defaultRunLength)) entries is sorted in batches"
            ),
            (
                "man/src/fpctl.md", "a listing's sorted batch",
                "a listing of more than \(grouped(SortedListing.defaultRunLength)) entries"
            ),
            (
                "docs/cache-format.md", "a migration's batch",
                "\(grouped(CacheMigration.chunk)) key directories at a time"
            ),
            (
                "docs/cache-format.md", "a compaction's segment size",
                "each synced and sealed once it holds \(LogSegment.rollBytes >> 20) MiB"
            ),
            (
                "docs/cache-format.md", "a text listing's rows in memory",
                "past \(grouped(AlignedRows.defaultInMemory)) rows they wait in such a file too"
            ),
            (
                "man/src/fpctl-cache-list.md", "a text listing's rows in memory",
                "keeps rows past the first \(grouped(AlignedRows.defaultInMemory)) in such a file"
            ),
            (
                "docs/cache-format.md", "a prune's rows in memory",
                "wait, past \(grouped(RemovalResult.rowsInMemory)), in a temporary file"
            ),
            (
                "man/src/fpctl-cache-prune.md", "a prune's rows in memory",
                "past the first \(grouped(RemovalResult.rowsInMemory)) rows, the rows wait in a temporary file"
            ),
            (
                "man/src/fpctl.md", "rows kept in TMPDIR",
                "keeps the rows of its text table past the first \(grouped(AlignedRows.defaultInMemory)), and `cache prune` the rows it reports past the first \(grouped(RemovalResult.rowsInMemory))"
            ),
            ("docs/cache-format.md", "the summary's name", "reads one file, `log/\(LogSummary.fileName)`"),
            ("man/src/fpctl-cache-info.md", "the summary's name", "only `log/\(LogSummary.fileName)`"),
            ("docs/cache-format.md", "the summary's version", "`version`: \(LogSummary.version)."),
            (
                "docs/cache-format.md", "the summary's bounds",
                "more than \(grouped(LogSummary.maxPlacements)) placements, or whose histograms together pass \(grouped(LogSummary.maxTotalBuckets)) buckets, gets none"
            ),
            (
                "docs/cache-format.md", "the summary's buckets",
                "(\(grouped(Int(LogSummary.granularities[0]))), coarsened to \(grouped(Int(LogSummary.granularities[1]))), then \(grouped(Int(LogSummary.granularities[2]))), then \(grouped(Int(LogSummary.granularities[3]))) while either holds more than \(grouped(LogSummary.maxBuckets)) buckets;"
            ),
            (
                "docs/cache-format.md", "the memory layer",
                "(default \(CacheStore.Budgets().imageMemoryBytes >> 20) MiB)"
            ),
        ])
    func stated(page: String, what: String, phrase: String) throws {
        #expect(try Self.text(page).contains(phrase), "\(page) should say, for \(what): \(phrase)")
    }

    @Test("docs/performance.md's summary table gives warm's instructions and its floor as the section measured them")
    func summaryTableIsTheSections() throws {
        let page = try String(
            contentsOf: Paths.packageRoot.appendingPathComponent("docs/performance.md"), encoding: .utf8)
        let lines = page.split(separator: "\n")
        // The section's row: "warm's instructions per identity (`warm_callgrind.py`, ..." under "Cache format 2".
        let section = try #require(
            lines.first { $0.hasPrefix("| warm's instructions per identity (`warm_callgrind.py`") })
        let summary = try #require(lines.first { $0.hasPrefix("| `warm`'s instructions per identity") })
        func figures(_ line: Substring) -> [String] {
            // The first bold figure of the section's cell, the floor's "NNN,NNN Ir" after "async `execute`".
            line.matches(of: /([0-9]{3},[0-9]{3}) Ir/).map { String($0.output.1) }
        }
        let measured = figures(section)
        #expect(measured.count >= 2, "\(section)")
        // fpctl's figure (the cell's first) and the async floor's must be the summary's.
        let floor = try #require(
            section.firstMatch(of: /async `execute` \(the API fpctl uses\) ([0-9,]+) Ir/)?.output.1)
        #expect(summary.contains("\(measured[0]) Ir"), "summary lacks \(measured[0]): \(summary)")
        #expect(summary.contains("\(floor) Ir"), "summary lacks the floor's \(floor): \(summary)")
    }

    @Test(
        "docs/decisions.md says the two formats' entry types are named in one place and verify and prune ask them, not an entry's format: the sources agree"
    )
    func formatsNamedOnce() throws {
        #expect(
            try Self.text("docs/decisions.md").contains(
                "`CacheStore.entries(log:)` is the one place that names the two types"))
        let cache = Paths.packageRoot.appendingPathComponent("Sources/FlowPilotCore/Cache")
        var naming: [String] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: cache.path) where name.hasSuffix(".swift") {
            let text = try String(contentsOf: cache.appendingPathComponent(name), encoding: .utf8)
            for line in text.split(separator: "\n")
            where line.contains("LoggedEntries(store:") || line.contains("FileEntries(store:") {
                naming.append("\(name): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(naming.count == 1 && naming[0].hasPrefix("FlowEntries.swift: func entries(log: Bool)"), "\(naming)")
        // The maintenance side asks each entry's format through the protocol, never the entry or the scan.
        for name in ["CacheStore+Prune.swift", "CacheStore+Maintenance.swift"] {
            let text = try String(contentsOf: cache.appendingPathComponent(name), encoding: .utf8)
            for asked in [".inLog", "scan.logged", "usesLog", "isLogged(path"] {
                #expect(!text.contains(asked), "\(name) asks \(asked)")
            }
        }
    }
}
