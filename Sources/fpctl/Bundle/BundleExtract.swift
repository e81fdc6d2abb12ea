import ArgumentParser
import FlowPilotCore

struct BundleExtract: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extract",
        abstract: "Validate a bundle, then extract it into a directory",
        discussion: """
            Extraction starts only after the whole bundle validates.
            It writes only inside the output directory (entry paths are canonical:
            no '..', no absolute paths, no links), checks every file's SHA-256 again
            as it is written, and moves the files into place only when all are written.
            Exit status: 65 invalid bundle, 66 missing bundle, 73 cannot write.
            """
    )

    @Argument(help: "The .fpbundle file.")
    var bundle: String

    @Option(name: .shortAndLong, help: "The directory to extract into (created when missing).")
    var output: String

    @Flag(help: "Extract into a directory that is not empty, replacing same-named files.")
    var force = false

    func run() throws {
        let result = try BundleExtractor.extract(bundle, into: output, force: force)
        Console.out("\(result.digest)  \(result.directory)\n")
        Console.note("extracted \(result.files) files, \(result.bytes) bytes into \(result.directory)")
    }
}
