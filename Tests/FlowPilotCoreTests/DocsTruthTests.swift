import Foundation
import Testing

@testable import FlowPilotCore

/// The numbers docs/cache-format.md (and so fpctl-cache(5)) states, read from
/// the code's own constants: a change to one that leaves the page behind fails
/// here, not in a reader's hands.
@Suite("docs/cache-format.md says what the code does")
struct DocsTruthTests {
    static let page: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/"
            && !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path)
        {
            url.deleteLastPathComponent()
        }
        return (try? String(contentsOf: url.appendingPathComponent("docs/cache-format.md"), encoding: .utf8)) ?? ""
    }()

    /// The page's text with its line breaks as spaces, so a phrase may wrap.
    static let text = page.split(whereSeparator: \.isNewline).joined(separator: " ")
        .replacingOccurrences(of: "  ", with: " ")

    @Test(
        "each stated number is the code's",
        arguments: [
            ("a field's bytes before it is hashed", "is over \(CacheStore.maxNameField) bytes"),
            ("the name limit", "within `NAME_MAX` (\(CacheNames.maxName) bytes)"),
            ("the clock skew", "up to **\(Int(CachedFlow.clockSkew)) seconds** ahead"),
            ("the wait for another node's marker", "for up to \(Int(CacheStore.markerWait)) seconds"),
            ("the fsync fan-out", "across up to \(GroupCommit.maxSyncThreads) threads"),
            ("the image budget", "(default \(CacheStore.Budgets().imageDiskBytes >> 20) MiB)"),
            (
                "the image total's measure",
                "after every \(CacheStore.ImageTally.remeasureEvery) images it writes or a second"
            ),
        ])
    func stated(what: String, phrase: String) {
        #expect(!Self.page.isEmpty, "docs/cache-format.md not found")
        #expect(Self.text.contains(phrase), "docs/cache-format.md should say, for \(what): \(phrase)")
    }

    @Test("the image total is measured again after a second, as the page says")
    func remeasure() {
        #expect(CacheStore.ImageTally.remeasureAfter == .seconds(1))
    }
}
