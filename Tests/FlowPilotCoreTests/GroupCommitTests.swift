import Foundation
import Synchronization
import Testing

@testable import FlowPilotCore

/// GroupCommit on a real directory: what a writer is told, and when.
@Suite("group commit")
final class GroupCommitTests {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("commit-\(UUID().uuidString)").path

    deinit { try? FileManager.default.removeItem(atPath: scratch) }

    /// Stages `count` files in directories of their own, queues them all, waits for every finish.
    private func commitAll(_ commit: GroupCommit, count: Int) throws -> [(any Error)?] {
        let staged = try (0..<count).map { i in
            try commit.stage(Data("entry \(i)".utf8), directory: "\(scratch)/keys/k\(i)", name: "e.json")
        }
        let results = Results()
        for (i, file) in staged.enumerated() {
            results.done.enter()
            commit.enqueue(file, waiter: Told(index: i, results: results))
        }
        #expect(results.done.wait(timeout: .now() + 60) == .success, "a writer was never told")
        return results.errors.withLock { r in (0..<count).map { r[$0] ?? nil } }
    }

    /// What each writer was told.
    final class Results: Sendable {
        let errors = Mutex<[Int: (any Error)?]>([:])
        let done = DispatchGroup()
    }

    /// Writer `index`'s waiter.
    struct Told: CommitWaiter {
        let index: Int
        let results: Results
        func committed(_ error: (any Error)?) {
            results.errors.withLock { $0[index] = error }
            results.done.leave()
        }
    }

    @Test("files queued while a commit runs share the next one: 300 files in a handful of commits, all named")
    func groups() throws {
        let commit = GroupCommit(maxBatch: 1024, syncThreads: 4)
        let results = try commitAll(commit, count: 300)
        #expect(results.allSatisfy { $0 == nil })
        for i in 0..<300 {
            #expect(
                (try? String(contentsOfFile: "\(scratch)/keys/k\(i)/e.json", encoding: .utf8)) == "entry \(i)")
        }
        let stats = commit.statistics
        #expect(stats.files == 300)
        #expect(stats.commits <= 5, "\(stats.commits) commits for 300 files queued at once")
        #expect(stats.largestGroup >= 100)
    }

    @Test("a group never exceeds maxBatch")
    func bounded() throws {
        let commit = GroupCommit(maxBatch: 16, syncThreads: 2)
        let results = try commitAll(commit, count: 100)
        #expect(results.allSatisfy { $0 == nil })
        #expect(commit.statistics.largestGroup <= 16)
        #expect(commit.statistics.commits >= 7)
    }

    @Test("a lone file is committed at once, not held for a group to fill")
    func lone() async throws {
        let commit = GroupCommit(maxBatch: 1024, syncThreads: 2)
        try await commit.publish(Data("one".utf8), directory: "\(scratch)/one", name: "e.json")
        #expect(try String(contentsOfFile: "\(scratch)/one/e.json", encoding: .utf8) == "one")
        #expect(commit.statistics.commits == 1)
    }

    @Test("a name that exists fails that file alone; the rest of its group is written")
    func oneFails() throws {
        let commit = GroupCommit(maxBatch: 1024, syncThreads: 2)
        try FileManager.default.createDirectory(atPath: "\(scratch)/keys/k3", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: "\(scratch)/keys/k3/e.json", contents: Data("old".utf8)))
        let results = try commitAll(commit, count: 6)
        #expect(results.enumerated().allSatisfy { i, error in (error == nil) == (i != 3) })
        #expect("\(results[3].map { "\($0)" } ?? "")".contains("k3/e.json"))
        #expect(try String(contentsOfFile: "\(scratch)/keys/k3/e.json", encoding: .utf8) == "old")
        #expect(try String(contentsOfFile: "\(scratch)/keys/k5/e.json", encoding: .utf8) == "entry 5")
    }
}
