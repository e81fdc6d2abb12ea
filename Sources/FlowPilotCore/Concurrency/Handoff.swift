import Foundation
import Synchronization

/// Items handed, in order, from the thread that makes them to one thread of
/// its own that consumes them, at most `capacity` waiting: the producer and
/// the consumer run on two cores at once (as `sort | less` does), and memory
/// holds a bounded number of items. `cache list` makes its entries on the
/// calling thread and renders and writes them here.
///
/// The consumer's first error stops it (the items after it are dropped
/// unread); the producer gets that error from its next `submit`, or from
/// `finish`, which waits for the consumer to be done and must be called once.
public final class Handoff<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var failure: (any Error)?
    }

    private let state = Mutex(State())
    /// Signalled once an item, and once by `finish`: the consumer wakes to an item or to the end.
    private let ready = DispatchSemaphore(value: 0)
    /// Free places for items.
    private let room: DispatchSemaphore
    /// Signalled by the consumer's thread as it ends.
    private let ended = DispatchSemaphore(value: 0)

    /// Items waiting at most; `consume` runs on the handoff's own thread, an item at a time.
    public init(capacity: Int = 2, consume: @escaping @Sendable (Item) throws -> Void) {
        room = DispatchSemaphore(value: max(1, capacity))
        let thread = Thread { [self] in
            while true {
                ready.wait()
                guard let item = state.withLock({ $0.items.isEmpty ? nil : $0.items.removeFirst() }) else { break }
                room.signal()
                guard state.withLock({ $0.failure == nil }) else { continue }
                do { try consume(item) } catch { state.withLock { if $0.failure == nil { $0.failure = error } } }
            }
            ended.signal()
        }
        thread.name = "fpctl.handoff"
        thread.start()
    }

    /// Hands `item` on, waiting while `capacity` items wait; throws the consumer's error, if it failed.
    public func submit(_ item: Item) throws {
        if let failure = state.withLock({ $0.failure }) { throw failure }
        room.wait()
        state.withLock { $0.items.append(item) }
        ready.signal()
    }

    /// Waits until every item handed on is consumed and the consumer's thread
    /// has ended; throws the consumer's error, if it failed.
    public func finish() throws {
        ready.signal()
        ended.wait()
        if let failure = state.withLock({ $0.failure }) { throw failure }
    }
}
