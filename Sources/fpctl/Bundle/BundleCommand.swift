import ArgumentParser

struct BundleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bundle",
        abstract: "Build, validate, preview, sign, pull and diff bundled default archives",
        subcommands: [
            BundleBuild.self, BundleValidate.self, BundleInspect.self, BundlePreviewCommand.self, BundleExtract.self,
            BundlePull.self, BundleDiff.self, BundleSign.self, BundleKeygen.self, BundleSchema.self,
        ]
    )
}
