import Dispatch
import FlowPilotCore
import Foundation
import Synchronization

/// What fpctl does with SIGTERM, SIGINT and SIGHUP (fpctl(1), SIGNALS):
/// - a command that can stop cleanly (`warm`, `serve`) registers how with
///   `onFirst`; the first SIGTERM or SIGINT asks it to, and it ends with its
///   own status;
/// - any other command, any command at a second signal, and any at SIGHUP,
///   ends at once:
///   the temporary files of outputs not yet published are removed
///   (`TemporaryFiles`), then the signal is raised again with its default
///   action, so the parent sees the process killed by it (shell 128+N).
///
/// Signals are taken by Dispatch sources (they are ignored as such, and the
/// sources see them), so what runs is ordinary code on a queue, not a handler
/// limited to async-signal-safe calls.
enum Signals {
    static let caught: [Int32] = [SIGTERM, SIGINT, SIGHUP]
    private static let queue = DispatchQueue(label: "fpctl.signals")
    /// Kept for the process's life; set once, by `install`, before anything runs.
    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
    private struct State {
        var received = 0
        var graceful: (@Sendable (Int32) -> Void)?
    }
    private static let state = Mutex(State())

    /// Takes the signals fpctl was not started with ignored: one its parent
    /// ignored (`nohup` ignores SIGHUP, a non-interactive shell's `&` SIGINT)
    /// stays ignored, as a shell's own children keep it.
    static func install() {
        sources = caught.filter { !inheritedIgnored($0) }.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            // A source coalesces signals that come before its handler runs: two quick
            // SIGTERMs are one event whose data is 2, and must count as two.
            // (The sources live as long as the process: the handler may hold its own.)
            source.setEventHandler { received(number, count: max(1, Int(source.data))) }
            source.resume()
            return source
        }
    }

    private static func inheritedIgnored(_ number: Int32) -> Bool { Platform.signalIsIgnored(number) }

    /// The command stops cleanly at the first SIGTERM or SIGINT by calling `handler`.
    static func onFirst(_ handler: @escaping @Sendable (Int32) -> Void) {
        state.withLock { $0.graceful = handler }
    }

    private static func received(_ number: Int32, count: Int) {
        let graceful = state.withLock { state -> (@Sendable (Int32) -> Void)? in
            state.received += count
            // A hang-up (the terminal went away) ends even warm at once.
            return state.received == 1 && number != SIGHUP ? state.graceful : nil
        }
        if let graceful {
            graceful(number)
        } else {
            end(by: number)
        }
    }

    /// Ends the process as killed by `number`, leaving no temporary file.
    static func end(by number: Int32) -> Never {
        TemporaryFiles.removeAll()
        signal(number, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, number)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        kill(getpid(), number)
        // Reached only as a PID namespace's init (fpctl as a container's first
        // process), where the kernel drops a signal the process sends itself
        // when its action is the default: exit with the figure a shell shows.
        exit(128 + number)
    }

    /// `SIGTERM`, `SIGINT`, `SIGHUP`.
    static func name(_ number: Int32) -> String {
        switch number {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        default: "signal \(number)"
        }
    }
}
