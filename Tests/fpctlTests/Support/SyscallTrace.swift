import Foundation
import Testing

/// The system calls of one fpctl run that decide what survives a power cut, as
/// `strace -f -y` saw them reach the kernel, in order: file and directory syncs
/// (by the path their descriptor names), syncs of a whole file system
/// (`syncfs`, a group commit's), publishes (a `linkat` of an unnamed file, a
/// `link` or a `rename`), writes to files, and what was written to standard
/// output. The tests' files are all on one file system, so any `syncfs` covers them.
struct SyscallTrace {
    enum Event: Equatable {
        /// A completed `fsync` of the descriptor `fd`, which names `path`.
        case sync(fd: Int, path: String)
        /// A name given to the bytes of descriptor `fd` (`linkat` of /proc/self/fd/N)
        /// or of the file at `source` (`link`, `rename`).
        case publish(fd: Int?, source: String?, target: String)
        /// Written to standard output (1) or standard error (2).
        case output(fd: Int, text: String)
        /// A completed `syncfs`: everything written before it is durable.
        case syncFileSystem
        /// Bytes written to descriptor `fd` (`write` or `pwrite64`), which
        /// names `path` (not standard output or error; an unnamed file is
        /// `<directory>/#<inode>`); `call` is strace's line, the bytes as it prints them.
        case fileWrite(fd: Int, path: String, call: String)
    }

    let events: [Event]
    let result: ProcessResult

    /// Runs fpctl under strace; standard output is the run's own. Each call
    /// named in `delaying` is held that long before it runs (strace's fault
    /// injection: a slow disk's `syncfs`, say).
    init(
        _ arguments: [String], in tmp: TemporaryDirectory, environment: [String: String] = [:],
        delaying: [String: Duration] = [:]
    ) throws {
        let delays = delaying.sorted { $0.key < $1.key }.flatMap { call, delay in
            let microseconds = delay.components.seconds * 1_000_000 + delay.components.attoseconds / 1_000_000_000_000
            return ["-e", "inject=\(call):delay_enter=\(microseconds)"]
        }
        let log = tmp.file("strace-\(UUID().uuidString).txt")
        result = try run(
            try tool("strace"),
            [
                "-f", "-qq", "-y", "-s", "65536", "-o", log, "-e",
                "trace=fsync,fdatasync,syncfs,link,linkat,rename,renameat2,write,pwrite64",
            ] + delays + [Paths.fpctl] + arguments, environment: environment)
        let text = try String(contentsOfFile: log, encoding: .utf8)
        events = Self.parse(text)
        traceHead = String(text.prefix(2000))
    }

    /// The start of strace's log, for a failed expectation.
    let traceHead: String

    /// strace lines into events; a call split by another thread's
    /// (`<unfinished ...>` … `<... fsync resumed>`) counts where it completed for a sync or a publish,
    /// and where it started for a write.
    static func parse(_ text: String) -> [Event] {
        var pending: [Substring: String] = [:]
        var events: [Event] = []
        for raw in text.split(separator: "\n") {
            guard let space = raw.firstIndex(of: " ") else { continue }
            let pid = raw[..<space]
            // strace pads the pid column ("%-5d "): one space or more.
            var line = String(raw[raw.index(after: space)...].drop { $0 == " " })
            // A call held back by `delaying` ends "= 0 (DELAYED)".
            if line.hasSuffix(" (DELAYED)") { line.removeLast(" (DELAYED)".count) }
            if line.hasSuffix("<unfinished ...>") {
                line.removeLast("<unfinished ...>".count)
                if line.hasPrefix("fsync(") || line.hasPrefix("fdatasync(") || line.hasPrefix("syncfs(")
                    || line.hasPrefix("linkat(") || line.hasPrefix("link(") || line.hasPrefix("rename(")
                    || line.hasPrefix("renameat2(")
                {
                    pending[pid] = line.trimmingCharacters(in: .whitespaces)
                    continue
                }
            } else if line.hasPrefix("<... fsync resumed>") || line.hasPrefix("<... fdatasync resumed>")
                || line.hasPrefix("<... syncfs resumed>") || line.hasPrefix("<... linkat resumed>")
                || line.hasPrefix("<... link resumed>") || line.hasPrefix("<... rename resumed>")
                || line.hasPrefix("<... renameat2 resumed>")
            {
                guard let started = pending.removeValue(forKey: pid) else { continue }
                line = started + (line.components(separatedBy: "resumed>").last ?? "")
            }
            if let event = event(line) { events.append(event) }
        }
        return events
    }

    private static func event(_ line: String) -> Event? {
        let strings = quoted(line)
        if line.hasPrefix("syncfs(") { return line.hasSuffix("= 0") ? .syncFileSystem : nil }
        if line.hasPrefix("fsync(") || line.hasPrefix("fdatasync(") {
            guard line.hasSuffix("= 0"), let fd = Int(line.drop { $0 != "(" }.dropFirst().prefix { $0 != "<" }),
                let open = line.firstIndex(of: "<"), let close = line.range(of: ">", options: .backwards)
            else { return nil }
            return .sync(fd: fd, path: String(line[line.index(after: open)..<close.lowerBound]))
        }
        // A publish counts where it completed, and only if it did (a second writer's
        // copy of a content-addressed name fails with EEXIST).
        let published = line.hasSuffix("= 0")
        if published, line.hasPrefix("linkat("), strings.count == 2, strings[0].hasPrefix("/proc/self/fd/") {
            return .publish(fd: Int(strings[0].dropFirst("/proc/self/fd/".count)), source: nil, target: strings[1])
        }
        if published, line.hasPrefix("link(") || line.hasPrefix("rename(") || line.hasPrefix("renameat2("),
            strings.count == 2
        {
            return .publish(fd: nil, source: strings[0], target: strings[1])
        }
        for fd in [1, 2] where line.hasPrefix("write(\(fd)<") {
            return strings.first.map { .output(fd: fd, text: $0) }
        }
        for call in ["write(", "pwrite64("] where line.hasPrefix(call) {
            guard let fd = Int(line.dropFirst(call.count).prefix { $0 != "<" && $0 != "," }) else { return nil }
            let path = line.drop { $0 != "<" }.dropFirst().prefix { $0 != ">" }
            return .fileWrite(fd: fd, path: String(path), call: line)
        }
        return nil
    }

    /// The double-quoted strings of a strace line, unescaped enough for paths and JSON.
    private static func quoted(_ line: String) -> [String] {
        var out: [String] = []
        var current: String?
        var escaped = false
        for ch in line {
            guard var text = current else {
                if ch == "\"" { current = "" }
                continue
            }
            if escaped {
                text.append(ch == "n" ? "\n" : ch)
                escaped = false
            } else if ch == "\\" {
                escaped = true
            } else if ch == "\"" {
                out.append(text)
                current = nil
                continue
            } else {
                text.append(ch)
            }
            current = text
        }
        return out
    }

    /// Every publish under `root` whose bytes were not synced before it, or whose
    /// directory was not synced after it, described for a failed expectation.
    func unsyncedPublishes(under root: String) -> [String] {
        var problems: [String] = []
        for (index, event) in events.enumerated() {
            guard case .publish(let fd, let source, let target) = event, target.hasPrefix(root) else { continue }
            // Since the last write to the descriptor (or from the start, for a named file).
            let lastWrite =
                fd.flatMap { fd in
                    events[..<index].lastIndex {
                        if case .fileWrite(fd, _, _) = $0 { return true }
                        return false
                    }
                } ?? -1
            let bytesSynced = events[(lastWrite + 1)..<index].contains { earlier in
                if earlier == .syncFileSystem { return true }
                guard case .sync(let syncedFD, let path) = earlier else { return false }
                if let fd { return syncedFD == fd }
                return path == source
            }
            if !bytesSynced { problems.append("\(target): published before its bytes were synced") }
            if directorySync(of: target, after: index) == nil {
                problems.append("\(target): its directory was not synced after it was published")
            }
        }
        return problems
    }

    /// The index of the first sync of `target`'s directory (or of the whole
    /// file system) after event `index`.
    func directorySync(of target: String, after index: Int) -> Int? {
        let directory = (target as NSString).deletingLastPathComponent
        return events[(index + 1)...].firstIndex { event in
            if event == .syncFileSystem { return true }
            if case .sync(_, let path) = event { return path == directory }
            return false
        }
    }

    /// How many `syncfs` calls the run made.
    var fileSystemSyncs: Int { events.filter { $0 == .syncFileSystem }.count }

    /// The publishes of files under `root`, with their positions.
    func publishes(under root: String) -> [(index: Int, target: String)] {
        events.enumerated().compactMap { index, event in
            if case .publish(_, _, let target) = event, target.hasPrefix(root) { return (index, target) }
            return nil
        }
    }

    /// The first write to a file under `root` whose bytes, as strace prints
    /// them, contain `text`: its position and the file's path.
    func firstFileWrite(under root: String, carrying text: String) -> (index: Int, path: String)? {
        for (index, event) in events.enumerated() {
            if case .fileWrite(_, let path, let call) = event, path.hasPrefix(root), call.contains(text) {
                return (index, path)
            }
        }
        return nil
    }

    /// The position of the first sync of the file at `path` (or of the whole
    /// file system) after event `index`.
    func fileSync(of path: String, after index: Int) -> Int? {
        events[(index + 1)...].firstIndex { event in
            if event == .syncFileSystem { return true }
            if case .sync(_, let synced) = event { return synced == path }
            return false
        }
    }

    /// The position of the first write to a file whose path contains `text`.
    func firstFileWrite(containing text: String) -> Int? {
        events.firstIndex { event in
            if case .fileWrite(_, let path, _) = event { return path.contains(text) }
            return false
        }
    }

    /// The position of the first write to standard output or error containing `text`.
    func firstOutput(containing text: String) -> Int? {
        events.firstIndex { event in
            if case .output(_, let written) = event { return written.contains(text) }
            return false
        }
    }
}
