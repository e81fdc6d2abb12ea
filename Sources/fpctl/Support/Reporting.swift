import ArgumentParser
import FlowPilotCore
import Foundation

/// Standard error, for logs, warnings and errors (data goes to standard output).
enum Console {
    static func error(_ message: String) {
        FileHandle.standardError.write(Data("fpctl: error: \(message)\n".utf8))
    }

    static func warn(_ message: String) {
        FileHandle.standardError.write(Data("fpctl: warning: \(message)\n".utf8))
    }

    static func note(_ message: String) {
        FileHandle.standardError.write(Data("\(message)\n".utf8))
    }

    static func out(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

/// Standard output for a large document (a preview page): written straight to
/// the descriptor, without a copy into `Data`.
enum StandardOutput {
    static func write(_ bytes: [UInt8]) throws {
        if let code = bytes.withUnsafeBytes({ writeAll(STDOUT_FILENO, $0) }) {
            throw FPError.cannotWrite("standard output: \(Errno.describe(code))")
        }
    }
}

extension ExitCode {
    /// The documented status, the only way a command picks an exit code.
    init(_ status: ExitStatus) { self.init(status.rawValue) }
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

/// A resolve failure for a person: its code and message, and for an untrusted
/// certificate the flag that trusts a private CA.
func describe(_ failure: ResolveFailure) -> String {
    "\(failure.code): \(failure.message)" + (failure.isUntrustedCertificate ? " (trust its CA with --cacert)" : "")
}

/// Standard output in 64 KiB writes, for long streamed listings.
final class BufferedOutput {
    private var buffer = Data()

    func write(_ text: String) { write(Data(text.utf8)) }

    func write(_ data: Data) {
        buffer.append(data)
        if buffer.count >= 1 << 16 { flush() }
    }

    func flush() {
        FileHandle.standardOutput.write(buffer)
        buffer.removeAll(keepingCapacity: true)
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
