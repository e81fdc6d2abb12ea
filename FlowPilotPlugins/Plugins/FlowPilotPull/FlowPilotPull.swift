import Foundation
import PackagePlugin

/// `swift package --allow-writing-to-package-directory --allow-network-connections all
///     fpctl-pull --api-url URL --app-id APP [-o FOLDER] PLACEMENT…`
///
/// Runs `fpctl bundle pull` into the package: into `-o FOLDER` (relative to
/// the package), else into the one bundle source the package's targets have
/// (a folder with `bundle.json`). Every other argument is fpctl's.
///
/// `swift package --allow-network-connections all fpctl-pull --diff --api-url URL --app-id APP`
/// runs `fpctl bundle diff --source FOLDER` instead: exit 3 when the source
/// is not what the backend serves.
@main
struct FlowPilotPull: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var arguments = arguments
        let diff = arguments.contains("--diff")
        arguments.removeAll { $0 == "--diff" }
        let folder = try SourceFolder.take(from: &arguments, package: context.package)
        let command =
            diff
            ? ["bundle", "diff", "--source", folder] + arguments : ["bundle", "pull"] + arguments + ["-o", folder]
        let status = try SourceFolder.run(try context.tool(named: "fpctl").url, command)
        if status != 0 { throw PullError("fpctl \(command[0]) \(command[1]) exited \(status)") }
    }
}

struct PullError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum SourceFolder {
    /// `-o FOLDER` / `--output FOLDER` taken out of `arguments`, made
    /// absolute against the package; else the package's one bundle source.
    static func take(from arguments: inout [String], package: Package) throws -> String {
        if let i = arguments.firstIndex(where: { $0 == "-o" || $0 == "--output" }), i + 1 < arguments.count {
            let folder = arguments[i + 1]
            arguments.removeSubrange(i...(i + 1))
            return folder.hasPrefix("/")
                ? folder : package.directoryURL.appending(path: folder).path(percentEncoded: false)
        }
        var found: [String] = []
        for target in package.targets {
            let walker = FileManager.default.enumerator(
                at: target.directoryURL, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles])
            while let url = walker?.nextObject() as? URL {
                if url.lastPathComponent == "bundle.json" {
                    found.append(url.deletingLastPathComponent().path(percentEncoded: false))
                }
            }
        }
        guard found.count == 1, let only = found.first else {
            throw PullError(
                found.isEmpty
                    ? "no bundle source (a folder with bundle.json) in the package's targets; name one with -o FOLDER"
                    : "several bundle sources (\(found.joined(separator: ", "))); name one with -o FOLDER")
        }
        return only
    }

    /// Runs fpctl with its output going where the plugin's does; its exit status.
    static func run(_ fpctl: URL, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = fpctl
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
