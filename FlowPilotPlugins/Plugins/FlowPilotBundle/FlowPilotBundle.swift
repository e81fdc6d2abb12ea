import Foundation
import PackagePlugin

/// Builds each bundle source of a target into a `.fpbundle` resource, with
/// `fpctl bundle build`, as a build command: its inputs are every file of the
/// source and its output one `.fpbundle` in the plugin's work directory, so it
/// runs again only when a file of the source changes. Offline; writes nowhere
/// else. A broken flow fails the build with
/// `…/flows/paywall.json:LINE:COL: error: RULE: message`, which Xcode and
/// `swift build` show at that line.
///
/// A bundle source is a folder of the target holding `bundle.json` (with
/// `flows/` and `assets/` beside it), or the folders a `fpctl-bundle.json`
/// in the target's folder names: `{"sources": ["../../flowpilot"]}`, relative
/// to the target's folder. The resource is named after the folder:
/// `flowpilot/` gives `flowpilot.fpbundle`, in `Bundle.module`.
@main
struct FlowPilotBundle: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        return try Self.commands(
            sources: BundleSources.find(in: target.directoryURL), fpctl: context.tool(named: "fpctl").url,
            workDirectory: context.pluginWorkDirectoryURL, label: target.name)
    }

    /// One build command per bundle source: `fpctl bundle build SOURCE -o WORK/NAME.fpbundle`.
    static func commands(sources: [URL], fpctl: URL, workDirectory: URL, label: String) -> [Command] {
        sources.map { source in
            let output = workDirectory.appending(path: "\(source.lastPathComponent).fpbundle")
            return .buildCommand(
                displayName: "fpctl bundle build \(source.lastPathComponent) (\(label))",
                executable: fpctl,
                arguments: [
                    "bundle", "build", source.path(percentEncoded: false), "-o", output.path(percentEncoded: false),
                    "--overwrite",
                ],
                environment: [:],
                inputFiles: BundleSources.files(under: source),
                outputFiles: [output])
        }
    }
}

#if canImport(XcodeProjectPlugin)
    import XcodeProjectPlugin

    /// In an Xcode project ("Run Build Tool Plug-ins" of a target's Build
    /// Phases): the sources an `fpctl-bundle.json` in the project's folder
    /// names, else every folder of the project holding a `bundle.json`.
    extension FlowPilotBundle: XcodeBuildToolPlugin {
        func createBuildCommands(context: XcodePluginContext, target: XcodeTarget) throws -> [Command] {
            try Self.commands(
                sources: BundleSources.find(in: context.xcodeProject.directoryURL),
                fpctl: context.tool(named: "fpctl").url, workDirectory: context.pluginWorkDirectoryURL,
                label: target.displayName)
        }
    }
#endif

enum BundleSources {
    static let configName = "fpctl-bundle.json"

    /// The bundle sources of a target: those its `fpctl-bundle.json` names,
    /// else every folder below it holding a `bundle.json`.
    static func find(in directory: URL) throws -> [URL] {
        let config = directory.appending(path: configName)
        if let data = FileManager.default.contents(atPath: config.path(percentEncoded: false)) {
            struct Config: Decodable { let sources: [String] }
            let parsed: Config
            do { parsed = try JSONDecoder().decode(Config.self, from: data) } catch {
                throw PluginError(
                    "\(config.path(percentEncoded: false)): expected {\"sources\": [\"folder\", …]}: \(error)")
            }
            return parsed.sources.map { directory.appending(path: $0).standardizedFileURL }
        }
        var found: [URL] = []
        let walker = FileManager.default.enumerator(
            at: directory, includingPropertiesForKeys: [.isDirectoryKey], options: [.skipsHiddenFiles])
        while let url = walker?.nextObject() as? URL {
            if ["DerivedData", "Pods", "Carthage"].contains(url.lastPathComponent) { walker?.skipDescendants() }
            if url.lastPathComponent == "bundle.json" { found.append(url.deletingLastPathComponent()) }
        }
        return found.sorted { $0.path < $1.path }
    }

    /// Every file of a source: a change to any of them builds it again.
    static func files(under source: URL) -> [URL] {
        var files: [URL] = []
        let walker = FileManager.default.enumerator(
            at: source, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles])
        while let url = walker?.nextObject() as? URL {
            if (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true { files.append(url) }
        }
        return files.sorted { $0.path < $1.path }
    }
}

struct PluginError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
