import ArgumentParser
import FlowPilotCore
import Foundation

/// The process's entry: checks that the system gives what the Swift runtime
/// reads, then runs `FPCTL`, and turns what a command throws into its exit
/// status (`ExitStatus`, the one place): a failure of the core through
/// `report` (one line each on standard error), a `Verdict` as it is (the
/// command printed what it found), everything else (usage errors, help) with
/// the argument parser's message and code, printed through `StandardOutput`
/// and `Console`.
///
/// On Linux, in a root without a process file system (a bare chroot, some
/// build sandboxes) the Swift runtime cannot work as it should:
/// `CommandLine` sees no arguments (so `fpctl bundle validate x` printed the
/// top-level help and exited 0, and a validation gate passed), and Dispatch's
/// thread pool traps (SIGILL, in about one run in fifteen on Debian 13). So
/// fpctl refuses to start there (`Platform.runtimeCanStart`), with one line
/// and status 1, before it parses anything.
@main
enum Entry {
    static func main() async {
        StandardOutput.holdClosedDescriptors()
        guard Platform.runtimeCanStart, !CommandLine.arguments.isEmpty else {
            Console.error(Platform.runtimeCannotStart)
            exit(ExitStatus.failure.rawValue)
        }
        // Swift repairs invalid UTF-8 in arguments to U+FFFD, which would make
        // `--user-id` another identity, or a path another file: refused instead.
        for index in 1..<Int(CommandLine.argc) {
            guard let raw = CommandLine.unsafeArgv[index], String(validatingCString: raw) == nil else { continue }
            Console.error(
                "argument \(index) (\(Printable.escaped(CommandLine.arguments[index]))) is not valid UTF-8; "
                    + "fpctl takes user ids, keys and paths as UTF-8")
            exit(ExitStatus.usage.rawValue)
        }
        Signals.install()
        // Past `ulimit -f` a write fails with EFBIG, which every writer handles (its temporary
        // file removed, a one-line error, 73), instead of SIGXFSZ ending fpctl mid-write.
        signal(SIGXFSZ, SIG_IGN)
        Platform.raiseOpenFileLimit()
        Platform.fitMemoryToAddressSpaceLimit()
        do {
            var command = try FPCTL.parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as FPError {
            exit(report(error).rawValue)
        } catch let verdict as Verdict {
            exit(ExitStatus(verdict).rawValue)
        } catch {
            // What the argument parser has to say (help, a version, a completion
            // script, a usage error), written through StandardOutput and Console
            // like everything else fpctl prints, so a failed write is reported
            // the same way instead of lost in `print`.
            let code = FPCTL.exitCode(for: error)
            let message = FPCTL.fullMessage(for: error)
            if !message.isEmpty {
                if code == .success { Console.out(message + "\n") } else { Console.raw(message + "\n") }
            }
            exit(code.rawValue)
        }
    }
}
