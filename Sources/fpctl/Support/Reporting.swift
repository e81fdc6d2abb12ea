import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

/// Standard error, for logs, warnings and errors (data goes to standard output).
/// A message that cannot be written is dropped: there is nowhere left to say so,
/// and the command's status still tells what happened.
enum Console {
    static func error(_ message: String) { raw("fpctl: error: \(shown(message))\n") }

    static func warn(_ message: String) { raw("fpctl: warning: \(shown(message))\n") }

    /// A message's control characters escaped (`Printable`), its line breaks kept: it may quote a
    /// backend's text or a file name, which must not reach the terminal as escape sequences.
    private static func shown(_ message: String) -> String {
        message.split(separator: "\n", omittingEmptySubsequences: false).map { Printable.escaped(String($0)) }
            .joined(separator: "\n")
    }

    static func note(_ message: String) { raw("\(message)\n") }

    /// Text as it is: a prompt, a progress line.
    static func raw(_ text: String) {
        var text = text
        _ = text.withUTF8 { writeAll(STDERR_FILENO, UnsafeRawBufferPointer($0)) }
    }

    static func out(_ text: String) {
        var text = text
        text.withUTF8 { StandardOutput.write(UnsafeRawBufferPointer($0)) }
    }
}

/// Standard output: every byte of data fpctl prints goes through `write`, the
/// one place that decides what a failed write means (docs/decisions.md,
/// "Standard output and error"):
/// - a reader that went away (EPIPE: `fpctl … | head -n1`) ends fpctl quietly
///   by SIGPIPE, as it ends `cat`: a shell reports status 141, and nothing is
///   printed;
/// - any other failure (a full disk, a closed descriptor: `>/dev/full`, `>&-`)
///   is one line on standard error and status 73 (cannot write). Files fpctl
///   published before that stay whole: only the report of them was lost.
enum StandardOutput {
    static func write(_ bytes: UnsafeRawBufferPointer) {
        if let code = writeAll(STDOUT_FILENO, bytes) { failed(code) }
    }

    static func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    static func write(_ data: Data) {
        data.withUnsafeBytes { write($0) }
    }

    private static func failed(_ code: Int32) -> Never {
        if code == EPIPE {
            signal(SIGPIPE, SIG_DFL)
            raise(SIGPIPE)
        }
        Console.error("standard output: \(Errno.describe(code))")
        // No output file half-made is left behind (a --metrics-file's temporary, say).
        TemporaryFiles.removeAll()
        exit(ExitStatus.cannotWrite.rawValue)
    }

    /// A standard descriptor the caller closed (`>&-`, `2>&-`, `<&-`) is held
    /// by /dev/null opened the other way round, before fpctl opens anything:
    /// otherwise the first file fpctl opened would get its number, and what it
    /// printed would land in that file (a cache entry, a bundle). Writing to a
    /// descriptor held so fails with EBADF, as writing to a closed one would.
    static func holdClosedDescriptors() {
        for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            let held = open("/dev/null", (fd == STDIN_FILENO ? O_WRONLY : O_RDONLY) | O_CLOEXEC)
            if held >= 0 && held != fd {
                dup2(held, fd)
                close(held)
            }
        }
    }
}

/// Prints a failure of the core (each finding on its own line, with the hint
/// that names the flag a person can use) and gives its exit status. `Entry`
/// calls it for whatever a command throws: the one place where a failure
/// becomes a status and a hint names a flag.
func report(_ error: FPError) -> ExitStatus {
    switch error {
    case .invalid(let findings):
        for finding in findings.filter({ $0.severity == .error }).bounded() { Console.error(finding.line) }
    case .outputExists:
        Console.error("\(error.description) (use --overwrite to replace it)")
    case .directoryNotEmpty:
        Console.error("\(error.description) (use --force to extract into it anyway)")
    default:
        Console.error(error.description)
    }
    return ExitStatus(error)
}

/// Bytes in 64 KiB writes, and at each `flush`, for long streamed output:
/// standard output (listings, warm's rows), or a file fpctl writes as a
/// stream (`file`, warm --output-dir's attempt file).
final class BufferedOutput: OutputSink {
    /// Bytes, not a `Data`: a warm appends a row or two an identity.
    private var buffer: [UInt8] = []
    private let drain: (UnsafeRawBufferPointer) -> Void
    private let finish: () -> Void

    /// `drain` writes what was buffered, whole, or ends fpctl (standard
    /// output's way, by default); `finish` is what `close` does after the
    /// last flush.
    init(
        drain: @escaping (UnsafeRawBufferPointer) -> Void = { StandardOutput.write($0) },
        finish: @escaping () -> Void = {}
    ) {
        self.drain = drain
        self.finish = finish
    }

    func write(_ text: String) { write(Data(text.utf8)) }

    func write(_ data: Data) {
        buffer.append(contentsOf: data)
        if buffer.count >= 1 << 16 { flush() }
    }

    func write(bytes: [UInt8]) { bytes.withUnsafeBytes { write(raw: $0) } }

    /// Bytes the caller holds, written before the call returns.
    func write(raw bytes: UnsafeRawBufferPointer) {
        // A piece as large as the buffer goes out as it is, not copied in (the buffer would keep its size).
        if bytes.count >= 1 << 16 {
            flush()
            drain(bytes)
            return
        }
        buffer.append(contentsOf: bytes)
        if buffer.count >= 1 << 16 { flush() }
    }

    func flush() {
        buffer.withUnsafeBytes { drain($0) }
        buffer.removeAll(keepingCapacity: true)
    }

    /// The last flush, then `finish`.
    func close() {
        flush()
        finish()
    }

    /// Into the open file `descriptor` (named `path` in errors), which `close`
    /// syncs and closes. A write or sync that fails is one line and status 73,
    /// as for standard output: the rows are what a resumed attempt reads, so
    /// a run that cannot keep them stops.
    static func file(_ descriptor: Int32, path: String) -> BufferedOutput {
        func failed(_ code: Int32) -> Never {
            Console.error("\(path): \(Errno.describe(code))")
            TemporaryFiles.removeAll()
            exit(ExitStatus.cannotWrite.rawValue)
        }
        return BufferedOutput(
            drain: { bytes in
                if let code = writeAll(descriptor, bytes) { failed(code) }
            },
            finish: {
                guard Platform.syncData(descriptor) else { failed(errno) }
                Platform.closeDescriptor(descriptor)
            })
    }
}

/// The time `cache info`, `cache list`, `cache prune`, `warm`, `resolve` and
/// `ready` take as now: `FPCTL_NOW` (RFC 3339) when set, so their output can be
/// reproduced (the golden tests pin it, WarmTests moves it past a TTL), else
/// the clock.
enum Now {
    static func date() throws -> Date { try pinned() ?? Date() }

    /// `FPCTL_NOW`, or nil when it is not set.
    static func pinned() throws -> Date? {
        guard let text = ProcessInfo.processInfo.environment["FPCTL_NOW"], !text.isEmpty else { return nil }
        guard let date = RFC3339.parse(text) else { throw FPError.usage("FPCTL_NOW=\(text): use an RFC 3339 time") }
        return date
    }
}
