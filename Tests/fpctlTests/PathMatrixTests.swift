import Foundation
import Testing

/// Every command that writes or reads a path, against every shape of path a
/// person can type or a system can put there: a matrix, not a list of cases.
/// Each case asserts the documented status, at most one line of error, no
/// crash, nothing half-made left behind, and the user's files as they were.
///
/// Shapes are made in a fresh working directory per case; the command runs
/// there with the path relative to it. `unlistable` drops the root powers
/// that ignore file modes (setpriv), so a mode-0300 directory means what it
/// says; `readOnly` is a read-only bind mount (CI runs as root).
@Suite("paths of every shape, for every command that takes one")
struct PathMatrixTests {
    enum Shape: String, CaseIterable, CustomStringConvertible, Sendable {
        case one = "x"
        case two = "xy"
        case dotSlash = "./x"
        case trailingSlash = "x/"
        case dot = "."
        case dotDot = ".."
        case space = "a b"
        case unicode = "é"
        case long255 = "255-byte name"
        case symlink = "a symbolic link"
        case dangling = "a dangling symbolic link"
        case fifo = "a FIFO"
        case device = "a device node"
        case readOnly = "in a read-only directory"
        case unlistable = "in an unlistable directory"
        case deepCwd = "from a working directory deeper than PATH_MAX"

        var description: String { rawValue }

        /// The path the command is given, relative to its working directory.
        var path: String {
            switch self {
            case .one, .two, .dotSlash, .trailingSlash, .dot, .dotDot, .space, .unicode: rawValue
            case .long255: String(repeating: "n", count: 255)
            case .symlink: "link"
            case .dangling: "dangling"
            case .fifo: "fifo"
            case .device: "null"
            case .readOnly: "ro/x"
            case .unlistable: "u/x"
            case .deepCwd: "x"
            }
        }
    }

    /// What a command does with its path.
    enum Kind: Sendable {
        /// Writes a file there (`-o`, `--output`, `--metrics-file`).
        case fileOutput
        /// Writes into a directory there, made when missing (`--cache-dir`, extract's `-o`).
        case directoryOutput
        /// Reads a file; `stream`: a pipe or device is read to its end, else a regular file is needed.
        case fileInput(stream: Bool)
        /// Reads a directory (a bundle source, a cache).
        case directoryInput
    }

    struct Command: CustomStringConvertible, Sendable {
        let name: String
        let kind: Kind
        /// The arguments, `P` standing for the path.
        let arguments: [String]
        /// What makes the output of a successful run good, given its path.
        let produced: @Sendable (String) -> Bool

        var description: String { name }
    }

    /// Inputs the commands read, made once: the demo bundle, its source, a
    /// key, identities, a put input, a warm output, a cache.
    struct Fixture: Sendable {
        /// Held for the run, removed when it ends.
        let directory: TemporaryDirectory
        var root: String { directory.path }
        var bundle: String { root + "/demo.fpbundle" }
        var source: String { Paths.sample("demo") }
        var key: String { root + "/release.key" }
        var identities: String { root + "/ids.jsonl" }
        var putInput: String { root + "/put.jsonl" }
        var warmOutput: String { root + "/warm.json" }
        var cache: String { root + "/cache" }

        static let shared: Fixture = {
            let f = Fixture(directory: try! TemporaryDirectory().removedAtExit())
            let root = f.root
            _ = try? fpctl("bundle", "build", f.source, "-o", f.bundle)
            _ = try? fpctl("bundle", "keygen", "-o", root + "/release")
            try? #"{"user_id":"u-1"}"#.appending("\n").write(toFile: f.identities, atomically: true, encoding: .utf8)
            try? writePutLine(f.putInput)
            _ = try? fpctl("cache", "put", "--cache-dir", f.cache, "--input", f.putInput)
            let warm = try? fpctl(
                "warm", "paywall", "--user-id", "u-1", "--api-url", unreachable, "--app-id", "demo", "--bundle",
                f.bundle, "--cache-dir", root + "/warm-cache", "--format", "json")
            try? warm?.stdout.write(toFile: f.warmOutput, atomically: true, encoding: .utf8)
            return f
        }()
    }

    /// Nobody listens there: resolve and warm fall back to the bundle.
    static let unreachable = "http://127.0.0.1:9"

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    static func validBundle(_ path: String) -> Bool {
        (try? fpctl("bundle", "validate", path).status) == 0
    }

    static func commands(_ f: Fixture) -> [Command] {
        let backend = ["--api-url", unreachable, "--app-id", "demo", "--bundle", f.bundle]
        return [
            Command(
                name: "bundle build -o", kind: .fileOutput, arguments: ["bundle", "build", f.source, "-o", "P"],
                produced: validBundle),
            Command(
                name: "bundle preview -o", kind: .fileOutput, arguments: ["bundle", "preview", f.bundle, "-o", "P"],
                produced: { (try? String(contentsOfFile: $0, encoding: .utf8))?.hasPrefix("<!DOCTYPE html>") == true }),
            Command(
                name: "bundle sign -o", kind: .fileOutput,
                arguments: ["bundle", "sign", f.bundle, "--key", f.key, "-o", "P"], produced: validBundle),
            Command(
                name: "resolve --output", kind: .fileOutput,
                arguments: ["resolve", "paywall", "--cache-dir", "cache-r", "--output", "P"] + backend,
                produced: { (try? String(contentsOfFile: $0, encoding: .utf8))?.contains("flow_paywall") == true }),
            Command(
                name: "warm --metrics-file", kind: .fileOutput,
                arguments: ["warm", "paywall", "--user-id", "u", "--cache-dir", "cache-w", "--metrics-file", "P"]
                    + backend,
                produced: { (try? String(contentsOfFile: $0, encoding: .utf8))?.contains("fpctl_warm_") == true }),
            Command(
                name: "bundle extract -o", kind: .directoryOutput,
                arguments: ["bundle", "extract", f.bundle, "-o", "P"],
                produced: { exists($0 + "/manifest.json") }),
            Command(
                name: "cache put --cache-dir", kind: .directoryOutput,
                arguments: ["cache", "put", "--cache-dir", "P", "--input", f.putInput],
                produced: { (try? fpctl("cache", "verify", "--cache-dir", $0).status) == 0 }),
            Command(
                name: "warm --cache-dir", kind: .directoryOutput,
                arguments: ["warm", "paywall", "--user-id", "u", "--cache-dir", "P"] + backend,
                produced: { (try? fpctl("cache", "info", "--cache-dir", $0).status) == 0 }),
            Command(
                name: "bundle validate", kind: .fileInput(stream: false), arguments: ["bundle", "validate", "P"],
                produced: { _ in true }),
            Command(
                name: "bundle inspect", kind: .fileInput(stream: false), arguments: ["bundle", "inspect", "P"],
                produced: { _ in true }),
            Command(
                name: "bundle preview", kind: .fileInput(stream: false),
                arguments: ["bundle", "preview", "P", "-o", "/dev/null"], produced: { _ in true }),
            Command(
                name: "bundle sign", kind: .fileInput(stream: false),
                arguments: ["bundle", "sign", "P", "--key", f.key, "-o", "/dev/null"], produced: { _ in true }),
            Command(
                name: "report", kind: .fileInput(stream: false), arguments: ["report", "P"], produced: { _ in true }),
            Command(
                name: "warm --identities", kind: .fileInput(stream: true),
                arguments: ["warm", "paywall", "--identities", "P", "--cache-dir", "cache-i"] + backend,
                produced: { _ in true }),
            Command(
                name: "cache put --input", kind: .fileInput(stream: true),
                arguments: ["cache", "put", "--cache-dir", "cache-p", "--input", "P"], produced: { _ in true }),
            Command(
                name: "bundle build", kind: .directoryInput, arguments: ["bundle", "build", "P", "-o", "/dev/null"],
                produced: { _ in true }),
            Command(
                name: "cache info", kind: .directoryInput, arguments: ["cache", "info", "--cache-dir", "P"],
                produced: { _ in true }),
            Command(
                name: "cache list", kind: .directoryInput, arguments: ["cache", "list", "--cache-dir", "P"],
                produced: { _ in true }),
            Command(
                name: "cache verify", kind: .directoryInput, arguments: ["cache", "verify", "--cache-dir", "P"],
                produced: { _ in true }),
        ]
    }

    static let matrix = commands(Fixture.shared)

    /// What a case should end with.
    enum Expected: Equatable {
        /// Status 0, the output good where the path leads.
        case done
        /// A one-line `fpctl: error:` and one of these statuses; nothing made.
        case refused([Int32])
    }

    static func expected(_ kind: Kind, _ shape: Shape) -> Expected {
        switch (kind, shape) {
        case (.fileOutput, .trailingSlash), (.fileOutput, .dot), (.fileOutput, .dotDot), (.fileOutput, .readOnly):
            .refused([64, 73])
        case (.fileOutput, _): .done
        case (.directoryOutput, .dotDot), (.directoryOutput, .fifo), (.directoryOutput, .device),
            (.directoryOutput, .readOnly), (.directoryOutput, .dangling):
            // The parent holds the working directory: extract refuses a non-empty directory (73), and
            // a cache one that is not a cache (65, the cache's format); a FIFO or device is not a directory.
            .refused([65, 73])
        case (.directoryOutput, _): .done
        case (.fileInput, .trailingSlash), (.fileInput, .dot), (.fileInput, .dotDot), (.fileInput, .dangling):
            .refused([66])
        case (.fileInput(stream: false), .fifo), (.fileInput(stream: false), .device): .refused([66])
        case (.fileInput, _): .done
        case (.directoryInput, .dotDot), (.directoryInput, .dangling), (.directoryInput, .fifo),
            (.directoryInput, .device):
            .refused([65, 66])
        case (.directoryInput, _): .done
        }
    }

    /// The working directory of one case, with the shape made in it.
    struct Case {
        let work: String
        let cwd: String
        let path: String
        let withoutRootPowers: Bool
        var cleanup: [() -> Void] = []
    }

    /// Puts what an input command reads at `path` (relative to `dir`).
    static func placeInput(_ kind: Kind, _ command: Command, at path: String, in dir: String) throws {
        let f = Fixture.shared
        let full = dir + "/" + path
        switch kind {
        case .fileInput:
            let source: String =
                switch command.name {
                case "report": f.warmOutput
                case "warm --identities": f.identities
                case "cache put --input": f.putInput
                default: f.bundle
                }
            try FileManager.default.copyItem(atPath: source, toPath: full)
        case .directoryInput:
            try FileManager.default.copyItem(atPath: command.name == "bundle build" ? f.source : f.cache, toPath: full)
        default:
            break
        }
    }

    func makeCase(_ command: Command, _ shape: Shape, _ tmp: TemporaryDirectory) throws -> Case {
        let work = tmp.file("work")
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: false)
        var cwd = work
        var path = shape.path
        var powers = false
        var cleanup: [() -> Void] = []
        let input: Bool =
            switch command.kind {
            case .fileInput, .directoryInput: true
            default: false
            }
        switch shape {
        case .one, .two, .space, .unicode, .long255:
            if input { try Self.placeInput(command.kind, command, at: path, in: work) }
        case .dotSlash:
            if input { try Self.placeInput(command.kind, command, at: "x", in: work) }
        case .trailingSlash:
            // An input: a file named x given as x/ (a directory input: the directory x).
            if input { try Self.placeInput(command.kind, command, at: "x", in: work) }
        case .dot:
            if case .directoryInput = command.kind {
                // The working directory itself is the input.
                try FileManager.default.removeItem(atPath: work)
                try Self.placeInput(command.kind, command, at: "work", in: tmp.path)
            }
        case .dotDot:
            break
        case .symlink:
            // A link to a file (or directory) that exists; outputs are run with their overwrite flag.
            if input {
                try Self.placeInput(command.kind, command, at: "real", in: work)
            } else if case .fileOutput = command.kind {
                try Data("theirs".utf8).write(to: URL(fileURLWithPath: work + "/real"))
            } else {
                try FileManager.default.createDirectory(atPath: work + "/real", withIntermediateDirectories: false)
            }
            try FileManager.default.createSymbolicLink(atPath: work + "/link", withDestinationPath: "real")
        case .dangling:
            try FileManager.default.createSymbolicLink(atPath: work + "/dangling", withDestinationPath: "gone")
        case .fifo:
            #expect(mkfifo(work + "/fifo", 0o644) == 0)
        case .device:
            // /dev/null's numbers (1:3), made here: needs root, as CI has.
            #expect(mknod(work + "/null", S_IFCHR | 0o666, 259) == 0)
        case .readOnly:
            let ro = work + "/ro"
            try FileManager.default.createDirectory(atPath: ro, withIntermediateDirectories: false)
            if input { try Self.placeInput(command.kind, command, at: "x", in: ro) }
            let mount = try tool("mount")
            try #require(try run(mount, ["--bind", ro, ro]).status == 0)
            cleanup.append { _ = try? run("/bin/umount", [ro]) }
            try #require(try run(mount, ["-o", "remount,ro,bind", ro]).status == 0)
        case .unlistable:
            let u = work + "/u"
            try FileManager.default.createDirectory(atPath: u, withIntermediateDirectories: false)
            if input { try Self.placeInput(command.kind, command, at: "x", in: u) }
            // Someone's file beside it, which nothing may touch.
            try Data("mine".utf8).write(to: URL(fileURLWithPath: u + "/mine"))
            chmod(u, 0o300)
            powers = true
        case .deepCwd:
            // Deeper than PATH_MAX (4096): 20 levels of 250-byte names.
            let level = String(repeating: "d", count: 250)
            for _ in 0..<Self.deepLevels {
                #expect(mkdirDeep(level, under: cwd))
                cwd += "/" + level
            }
            if input { try Self.placeInputDeep(command, at: "x", in: work) }
            path = "x"
        }
        return Case(work: work, cwd: cwd, path: path, withoutRootPowers: powers, cleanup: cleanup)
    }

    static let deepLevels = 20
    static let deepLevel = String(repeating: "d", count: 250)

    /// `cd` into the deep directory under `work` one level at a time (its
    /// whole name is too long for the system), as a shell command.
    static func intoDeep(_ work: String) -> String {
        "cd '\(work)' && " + Array(repeating: "cd -P \(deepLevel)", count: deepLevels).joined(separator: " && ")
    }

    /// Copies an input into the directory too deep for absolute paths, through the shell.
    static func placeInputDeep(_ command: Command, at name: String, in work: String) throws {
        let f = Fixture.shared
        let source: String =
            switch command.kind {
            case .directoryInput: command.name == "bundle build" ? f.source : f.cache
            default:
                switch command.name {
                case "report": f.warmOutput
                case "warm --identities": f.identities
                case "cache put --input": f.putInput
                default: f.bundle
                }
            }
        let r = try run(try tool("sh"), ["-c", "\(intoDeep(work)) && cp -r '\(source)' '\(name)'"])
        try #require(r.status == 0, "\(r.stderr)")
    }

    @Test("each command, each shape", arguments: matrix, Shape.allCases)
    func pathShape(command: Command, shape: Shape) throws {
        let tmp = try TemporaryDirectory()
        var c = try makeCase(command, shape, tmp)
        defer {
            for undo in c.cleanup { undo() }
            c.cleanup = []
            chmod(c.work + "/u", 0o755)
            // A deep tree is removed through the shell, whose rm walks it with relative names.
            _ = try? run("/bin/rm", ["-rf", tmp.path])
        }
        var args = command.arguments.map { $0 == "P" ? c.path : $0 }
        if shape == .symlink, case .fileOutput = command.kind,
            ["bundle build -o", "bundle preview -o", "bundle sign -o", "resolve --output"].contains(command.name)
        {
            args.append("--overwrite")
        }
        // A FIFO output needs a reader; a stream input from a FIFO, a writer.
        var partner: Process?
        if shape == .fifo {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: try tool("sh"))
            switch command.kind {
            case .fileOutput: p.arguments = ["-c", "cat '\(c.work)/fifo' > '\(tmp.file("received"))'"]
            case .fileInput(stream: true):
                let source = command.name == "warm --identities" ? Fixture.shared.identities : Fixture.shared.putInput
                p.arguments = ["-c", "cat '\(source)' > '\(c.work)/fifo'"]
            default: p.arguments = ["-c", "true"]
            }
            try p.run()
            partner = p
        }
        var executable = Paths.fpctl
        var directory: String? = c.cwd
        if c.withoutRootPowers {
            executable = try tool("setpriv")
            args = ["--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all", Paths.fpctl] + args
        } else if shape == .deepCwd {
            executable = try tool("sh")
            args = ["-c", Self.intoDeep(c.work) + " && exec \"$0\" \"$@\"", Paths.fpctl] + args
            directory = nil
        }
        let r = try run(executable, args, currentDirectory: directory, timeout: 60)
        if let partner {
            if partner.isRunning && shape == .fifo {
                // Nobody opened the FIFO: let the partner go.
                let fd = open(c.work + "/fifo", O_RDWR | O_NONBLOCK)
                if fd >= 0 { close(fd) }
                kill(partner.processIdentifier, SIGKILL)
            }
            partner.waitUntilExit()
        }
        let label = "\(command.name) with \(shape) (\(args.joined(separator: " ")))"
        #expect(!r.stderr.contains("Fatal error") && !r.stderr.contains("Backtrace"), "\(label): \(r.stderr)")
        switch Self.expected(command.kind, shape) {
        case .done:
            #expect(r.status == 0, "\(label): \(r.status) \(r.stderr)")
            if r.status == 0, shape != .deepCwd, shape != .device, shape != .fifo {
                let target = c.work + "/" + (shape == .symlink ? "real" : shape == .dangling ? "gone" : c.path)
                #expect(command.produced(target), "\(label): nothing good at \(target)")
            }
        case .refused(let statuses):
            #expect(statuses.contains(r.status), "\(label): \(r.status) \(r.stderr)")
            #expect(r.stderr.hasPrefix("fpctl: error: ") || r.stderr.hasPrefix("Error: "), "\(label): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "\(label): \(r.stderr)")
        }
        // What the shape was, it still is.
        var info = stat()
        switch shape {
        case .symlink, .dangling:
            #expect(lstat(c.work + "/" + c.path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "\(label)")
        case .fifo:
            #expect(lstat(c.work + "/fifo", &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "\(label)")
        case .device:
            #expect(lstat(c.work + "/null", &info) == 0 && info.st_mode & S_IFMT == S_IFCHR, "\(label)")
        case .unlistable:
            chmod(c.work + "/u", 0o755)
            #expect(FileManager.default.contents(atPath: c.work + "/u/mine") == Data("mine".utf8), "\(label)")
        default:
            break
        }
        // No temporary file left anywhere in the working directory.
        if shape != .deepCwd {
            let leftovers = (FileManager.default.enumerator(atPath: c.work)?.allObjects as? [String] ?? [])
                .filter { $0.contains(".tmp-") }
            #expect(leftovers.isEmpty, "\(label): \(leftovers)")
        }
    }
}

/// `mkdir` of `name` under `dir`, which may be too deep to name whole: opened a component at a time.
private func mkdirDeep(_ name: String, under dir: String) -> Bool {
    let parts = dir.split(separator: "/")
    var fd = open("/", O_RDONLY | O_DIRECTORY)
    for part in parts {
        let next = openat(fd, String(part), O_RDONLY | O_DIRECTORY)
        close(fd)
        guard next >= 0 else { return false }
        fd = next
    }
    defer { close(fd) }
    return mkdirat(fd, name, 0o755) == 0
}
