import Foundation
import Testing

/// `bundle pull` into a source directory a person also keeps files in.
@Suite("bundle pull removes only what an earlier pull wrote")
struct PullOwnershipTests {
    @Test("a placement dropped from the pull goes; the person's own files in flows/ and assets/ stay")
    func ownFilesStay() throws {
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let tmp = try TemporaryDirectory()
        let src = tmp.file("src")
        let first = try fpctl(
            "bundle", "pull", "onboarding", "paywall", "--api-url", server.url, "--app-id", "demo", "-o", src)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(FileManager.default.fileExists(atPath: "\(src)/flows/paywall.json"))
        try Data("mine".utf8).write(to: URL(fileURLWithPath: "\(src)/assets/mine.txt"))
        try Data("{}".utf8).write(to: URL(fileURLWithPath: "\(src)/flows/notes.json"))
        let second = try fpctl("bundle", "pull", "onboarding", "--api-url", server.url, "--app-id", "demo", "-o", src)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(src)/flows/paywall.json"))
        #expect(FileManager.default.contents(atPath: "\(src)/assets/mine.txt") == Data("mine".utf8))
        #expect(FileManager.default.contents(atPath: "\(src)/flows/notes.json") == Data("{}".utf8))
        #expect(FileManager.default.fileExists(atPath: "\(src)/flows/onboarding.json"))
    }
}
