import Foundation
import Testing

@testable import FlowPilotCore

/// `bundle build` hashes each source file once, while planning, and trusts the
/// file's stamp (inode, size, times) while writing; a file changed in between
/// must fail the build, whether its stamp shows it or (changed too recently to
/// tell) the second hash does.
@Suite("bundle build notices a source changed between planning and writing")
struct BundleStampTests {
    static let demo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("bundles/demo").path

    /// A copy of the demo source and an output path in a fresh directory.
    func copy() throws -> (dir: String, source: String, output: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("stamp-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.demo, toPath: "\(dir)/demo")
        return (dir, "\(dir)/demo", "\(dir)/out.fpbundle")
    }

    /// Rewrites a file with other bytes of the same size, in place (same inode),
    /// and sets its modification time an hour back: a stamp taken before shows
    /// the change even when the kernel's coarse clock has not ticked since.
    static func rewriteSameSize(_ path: String) {
        let handle = FileHandle(forUpdatingAtPath: path)!
        let size = Int(handle.seekToEndOfFile())
        handle.seek(toFileOffset: UInt64(size / 2))
        handle.write(Data(repeating: 0x5A, count: min(64, size / 4)))
        handle.closeFile()
        let hourAgo = timespec(tv_sec: Int(Date().timeIntervalSince1970) - 3600, tv_nsec: 0)
        var times = [hourAgo, hourAgo]
        utimensat(AT_FDCWD, path, &times, 0)
    }

    @Test("a file stamped long enough ago carries its stamp; one changed within the racy window gets none")
    func racy() throws {
        let (dir, source, _) = try copy()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = "\(source)/assets/badge.png"
        let fd = open(file, O_RDONLY)
        defer { close(fd) }
        #expect(FileStamp.stamp(fd) == nil, "a file copied just now is racy")
        let later = Date().addingTimeInterval(Double(FileStamp.racyWindow) + 1)
        let stamp = try #require(FileStamp.stamp(fd, now: later))
        Self.rewriteSameSize(file)
        #expect(FileStamp(fd: fd) != stamp, "a rewrite in place left the stamp as it was")
    }

    @Test(
        "a same-size rewrite after planning fails the build and leaves no output, through the stamp and through the rehash"
    )
    func changedSource() throws {
        for pastRacyWindow in [true, false] {
            let (dir, source, output) = try copy()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            var options = BundleBuilder.Options()
            // The build's clock, past the racy window: the copy is old enough for its stamp to be trusted.
            if pastRacyWindow { options.stampTime = Date().addingTimeInterval(Double(FileStamp.racyWindow) + 1) }
            let target = "\(source)/assets/badge.png"
            options.beforeWriting = { Self.rewriteSameSize(target) }
            do {
                _ = try BundleBuilder.build(sourceDirectory: source, output: output, options: options)
                Issue.record("the build succeeded over a changed source (stamped: \(pastRacyWindow))")
            } catch let error as FPError {
                guard case .cannotWrite = error else {
                    Issue.record("not a write failure: \(error)")
                    return
                }
                #expect(error.description.contains("its source changed while the bundle was being built"), "\(error)")
            }
            #expect(!FileManager.default.fileExists(atPath: output))
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["demo"], "debris left behind")
        }
    }
}
