import NIOCore
import Synchronization

/// Events for one consumer from any number of producers, in the order
/// posted: a run's children tell its loop what happened (`WarmRun`) without
/// each being a task that ends to say it. `next` waits while there is none.
final class Mailbox<Event: Sendable>: Sendable {
    private struct State {
        var events = CircularBuffer<Event>()
        /// The consumer, waiting for the next event.
        var waiter: UnsafeContinuation<Event, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Hands `event` to the waiting consumer, or keeps it for the next `next`.
    func post(_ event: Event) {
        let waiter = state.withLock { state -> UnsafeContinuation<Event, Never>? in
            guard let waiter = state.waiter else {
                state.events.append(event)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: event)
    }

    /// The next event, waiting for it when none is kept. One consumer only:
    /// its continuation is resumed once, by the `post` that takes it.
    func next() async -> Event {
        if let event = state.withLock({ $0.events.popFirst() }) { return event }
        return await withUnsafeContinuation { continuation in
            let event = state.withLock { state -> Event? in
                if let event = state.events.popFirst() { return event }
                state.waiter = continuation
                return nil
            }
            if let event { continuation.resume(returning: event) }
        }
    }
}
