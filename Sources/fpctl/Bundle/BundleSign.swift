import ArgumentParser
import FlowPilotCore

struct BundleSign: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Sign a bundle's manifest with an Ed25519 key (adds manifest.sig)",
        discussion: """
            Validates the bundle, then rewrites it with manifest.sig as the second entry:
            an Ed25519 signature over the exact bytes of manifest.json, with the key id.
            Every other entry and header stays as it was, so the archive stays canonical.
            Verify with bundle validate --public-key.
            With -o, writes the signed bundle there instead, replacing an existing
            file only with --overwrite.
            """
    )

    @Argument(help: "The .fpbundle to sign (replaced atomically unless -o is given).") var bundle: String
    @Option(help: "The private key file from bundle keygen.") var key: String
    @Option(name: .shortAndLong, help: "Write the signed bundle here instead.") var output: String?
    @Flag(help: "Replace the -o file if it exists.") var overwrite = false

    func run() throws {
        let pair = try BundleSigning.loadPrivate(key)
        let digest = try BundleSigning.sign(bundle, key: pair, output: output, overwrite: overwrite)
        Console.out("\(digest)  \(output ?? bundle)\n")
        Console.note("signed with key \(pair.keyID)")
    }
}

struct BundleKeygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Write an Ed25519 key pair for bundle signing",
        discussion: """
            Writes the private key (mode 0600) to the base path with the ending key,
            the public key with the ending pub, and prints the key id.
            Refuses to replace existing files.
            """
    )

    @Option(name: .shortAndLong, help: "Base path of the two key files.") var output: String

    func run() throws {
        let id = try BundleSigning.generate(base: output)
        Console.out("\(id)\n")
        Console.note("wrote \(output).key (keep it secret) and \(output).pub")
    }
}
