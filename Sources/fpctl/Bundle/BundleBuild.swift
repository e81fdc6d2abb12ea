import ArgumentParser
import FlowPilotCore
import Foundation

struct BundleBuild: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "build",
        abstract: "Build a canonical .fpbundle from a bundle source directory",
        discussion: """
            Validates the source first: bundle.json, every flow, and every image and
            font a flow references.
            Only regular files are read: a symbolic link anywhere below the source
            directory is refused (rule source-symlink), so no link can ship a host
            file, and so is a device, FIFO or socket (source-special-file).
            Each image and font must be what its extension says, by its first bytes
            (png, jpg/jpeg, gif, webp, mp4, ttf, otf, woff, woff2; rule
            media-type-mismatch).
            Then writes a zip whose bytes depend only on the source content:
            entries sorted, manifest.json first, mode 0644, and every timestamp set to
            the bundle's created_at (SOURCE_DATE_EPOCH when set, else created_at in
            bundle.json, else 1980-01-01T00:00:00Z).
            Already-compressed media are stored, everything else deflated.
            Prints the bundle digest, the SHA-256 of manifest.json.
            Nothing is left behind on failure.
            Exit status: 65 invalid source, 66 missing source, 73 output not written.
            """
    )

    @Argument(help: "The bundle source directory (holds bundle.json).")
    var source: String

    @Option(name: .shortAndLong, help: "The .fpbundle file to write.")
    var output: String

    @Flag(help: "Replace the output file when it exists.")
    var overwrite = false

    func run() throws {
        let options = BundleBuilder.Options(
            overwrite: overwrite,
            sourceDateEpoch: ProcessInfo.processInfo.environment["SOURCE_DATE_EPOCH"])
        let result = try BundleBuilder.build(sourceDirectory: source, output: output, options: options)
        for warning in result.warnings { Console.warn(warning.body) }
        Console.out("\(result.digest)  \(result.output)\n")
        Console.note(
            "built \(result.output): \(result.manifest.placements.count) placements, "
                + "\(result.manifest.media.count) images, \(result.manifest.fonts.count) fonts, \(result.bytesWritten) bytes"
        )
    }
}
