import ArgumentParser

struct BundleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bundle",
        abstract: "Build, validate, inspect and extract bundled default archives",
        subcommands: [BundleBuild.self, BundleValidate.self, BundleInspect.self, BundleExtract.self]
    )
}
