import Foundation
import Testing

@testable import FlowPilotCore

/// Warm's limits decided once (`WarmLimits`) and the loop that keeps them
/// (`WarmRun.FlowControl`): what `--concurrency` becomes, and what the loop
/// lets run, event by event.
@Suite("warm's limits and its flow control")
struct WarmLimitsTests {
    @Test("one value gives the loop, the pool and the downloads their limits")
    func oneValue() throws {
        let limits = WarmLimits(concurrency: 16, mediaConcurrency: 4, grace: .seconds(3), placements: 2)
        #expect(limits.lowered == nil)
        #expect(limits.maxInFlight == 32)
        // A batch request per identity resolving, or one per placement, and the downloads.
        #expect(limits.connections == 16 * 2 + 4)
        let options = WarmRun.Options(placements: ["a", "b", "a"], limits: limits)
        #expect(options.placements == ["a", "b"])
        #expect(options.concurrency == 16 && options.maxInFlight == 32 && options.grace == .seconds(3))
        var configuration = WarmConfiguration()
        limits.configure(&configuration)
        #expect(configuration.mediaConcurrency == 4 && configuration.mediaGrace == .seconds(3))
        // --concurrency 1 keeps one identity at a time, commit included.
        #expect(WarmLimits(concurrency: 1, placements: 1).maxInFlight == 1)
    }

    @Test("the open-files fit: concurrency first, then downloads, never below 1; what it lowered is data")
    func fit() throws {
        let asked = WarmLimits(
            concurrency: 14, mediaConcurrency: 8, placements: 2, freeDescriptors: 40, openFileLimit: 64)
        #expect(asked.descriptors <= 40)
        #expect(asked.concurrency < 14 && asked.concurrency >= 1)
        let lowered = try #require(asked.lowered)
        #expect(lowered.message.hasPrefix("--concurrency lowered from 14 to \(asked.concurrency)"))
        #expect(lowered.message.hasSuffix(": the open-files limit (ulimit -n) is 64"))
        // Each download counts what it holds: its connection, its file, the lock as it is named.
        let downloads = WarmLimits(concurrency: 1, mediaConcurrency: 16, placements: 1)
        let one = WarmLimits(concurrency: 1, mediaConcurrency: 1, placements: 1)
        #expect(downloads.descriptors - one.descriptors == 15 * WarmLimits.perDownload)
        #expect(WarmLimits.perDownload == 3)
        // Too few descriptors for even one identity: 1 and 1, still said.
        let tight = WarmLimits(concurrency: 8, mediaConcurrency: 8, placements: 3, freeDescriptors: 2)
        #expect(tight.concurrency == 1 && tight.mediaConcurrency == 1)
        #expect(tight.lowered?.message.contains("and --media-concurrency from 8 to 1") == true)
        // Room enough: nothing lowered, nothing said.
        #expect(WarmLimits(concurrency: 8, placements: 2, freeDescriptors: 100_000).lowered == nil)
    }

    @Test("the loop starts at most --concurrency resolving and --concurrency more writing, reads one line at a time")
    func flowControl() {
        let identity = Identity(userID: "u")
        var flow = WarmRun.FlowControl(
            options: WarmRun.Options(placements: ["p"], limits: WarmLimits(concurrency: 2, placements: 1)))
        // Reads: one at a time, while fewer than --concurrency are queued.
        let step1 = flow.shouldRead()
        #expect(step1)
        let step2 = flow.shouldRead()
        #expect(!step2, "a second read while one runs")
        flow.reading = false
        for _ in 0..<3 { flow.queue.append((identity, ["p"])) }
        let step3 = flow.shouldRead()
        #expect(!step3, "three queued, more than --concurrency 2")
        // Starts: two resolving at most.
        let step4 = flow.nextToStart()
        #expect(step4 != nil)
        let step5 = flow.nextToStart()
        #expect(step5 != nil)
        let step6 = flow.nextToStart()
        #expect(step6 == nil, "a third while two resolve")
        // An answer gives the place to the next; the in-flight bound is 4 (resolving + writing).
        flow.answered()
        #expect(flow.resolving == 1 && flow.writing == 1)
        let step7 = flow.nextToStart()
        #expect(step7 != nil)
        flow.answered()
        flow.answered()
        #expect(flow.resolving == 0 && flow.writing == 3)
        flow.queue.append((identity, ["p"]))
        flow.queue.append((identity, ["p"]))
        let step8 = flow.nextToStart()
        #expect(step8 != nil, "in flight 4 = maxInFlight after this one")
        let step9 = flow.nextToStart()
        #expect(step9 == nil, "maxInFlight reached: resolving 1 + writing 3")
        flow.finished()
        let step10 = flow.nextToStart()
        #expect(step10 != nil)
        // A stop starts nothing more and reads nothing more; done once nothing is in flight.
        flow.queue.append((identity, ["p"]))
        flow.stop()
        let step11 = flow.nextToStart()
        let readAfterStop = flow.shouldRead()
        #expect(step11 == nil && !readAfterStop)
        #expect(!flow.isDone)
        flow.answered()
        flow.answered()
        for _ in 0..<4 { flow.finished() }
        #expect(flow.inFlight == 0 && flow.isDone)
    }

    @Test("--concurrency 1: one identity at a time, its commit included")
    func one() {
        let identity = Identity(userID: "u")
        var flow = WarmRun.FlowControl(
            options: WarmRun.Options(placements: ["p"], limits: WarmLimits(concurrency: 1, placements: 1)))
        flow.queue.append((identity, ["p"]))
        flow.queue.append((identity, ["p"]))
        let step12 = flow.nextToStart()
        #expect(step12 != nil)
        flow.answered()
        let step13 = flow.nextToStart()
        #expect(step13 == nil, "the next waits for the first's commit")
        flow.finished()
        let step14 = flow.nextToStart()
        #expect(step14 != nil)
    }
}
