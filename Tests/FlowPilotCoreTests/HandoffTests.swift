import Foundation
import Synchronization
import Testing

@testable import FlowPilotCore

@Suite("Handoff: a producer's items consumed in order on a thread of their own")
struct HandoffTests {
    struct Failed: Error, Equatable {}

    @Test("every item reaches the consumer once, in the order submitted, on a thread that is not the producer's")
    func inOrder() throws {
        let seen = Mutex<[Int]>([])
        let threads = Mutex<Set<UInt>>([])
        let handoff = Handoff<Int>(capacity: 2) { item in
            seen.withLock { $0.append(item) }
            threads.withLock { _ = $0.insert(UInt(pthread_self())) }
        }
        for item in 0..<1_000 { try handoff.submit(item) }
        try handoff.finish()
        #expect(seen.withLock { $0 } == Array(0..<1_000))
        let consumers = threads.withLock { $0 }
        #expect(consumers.count == 1 && !consumers.contains(UInt(pthread_self())), "one thread, not the producer's")
    }

    @Test("the consumer's first error reaches the producer, and nothing after the failed item is consumed")
    func failure() throws {
        let seen = Mutex<[Int]>([])
        // The consumer waits for the producer's word before each item, so what it has seen is known exactly.
        let go = DispatchSemaphore(value: 0)
        let handoff = Handoff<Int>(capacity: 1) { item in
            go.wait()
            seen.withLock { $0.append(item) }
            if item == 3 { throw Failed() }
        }
        for item in 0..<4 {
            try handoff.submit(item)
            go.signal()
        }
        // Items 0 to 3 handed on; the consumer fails at 3. The next submit waits for room, then may or may not see
        // the failure, depending on whether the consumer reached it: finish always does.
        #expect(throws: Failed.self) {
            for item in 4..<100 {
                try handoff.submit(item)
                go.signal()
            }
            try handoff.finish()
        }
        #expect(seen.withLock { $0 } == [0, 1, 2, 3])
    }

    @Test("finish with nothing submitted ends the consumer's thread and returns")
    func empty() throws {
        let handoff = Handoff<Int> { _ in Issue.record("nothing to consume") }
        try handoff.finish()
    }
}
