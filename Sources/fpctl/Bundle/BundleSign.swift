import ArgumentParser
import FlowPilotCore
import Foundation

struct BundleSign: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Sign a bundle's manifest with an Ed25519 key (adds manifest.sig)",
        discussion: """
            Validates the bundle, then rewrites it with manifest.sig as the second entry.
            Every other entry and header stays as it was, so the archive stays canonical.
            Without --trust, the single-key form: a signature over the exact bytes of
            manifest.json, with the key id; verify with bundle validate --public-key.
            With --trust, the trust-root form: a statement of the manifest's SHA-256,
            the app id, --sequence, the signing time (SOURCE_DATE_EPOCH when set) and
            --expires, signed by a key the trust root delegates to, with every root
            version the file holds; verify with bundle validate --trust. A key the
            newest root does not delegate to now (or revoked, or whose delegation ends
            before the signing time), a sequence below its min_sequence, or a root for
            another app or past its expiry is refused before anything is written
            (exit status 64).
            --key takes a key file (mode 0600; a file others may read is refused),
            env:NAME (the key file's contents in an environment variable) or fd:N.
            With -o, writes the signed bundle there instead, replacing an existing
            file only with --overwrite.
            """
    )

    @Argument(help: "The .fpbundle to sign (replaced atomically unless -o is given).") var bundle: String
    @Option(help: ArgumentHelp("The private key from bundle keygen: a file, env:NAME or fd:N.", valueName: "key"))
    var key: String
    @Option(help: ArgumentHelp("Sign in the trust-root form, under this trust.json.", valueName: "trust.json"))
    var trust: String?
    @Option(help: "The bundle's sequence number (with --trust): higher than every bundle it replaces.")
    var sequence: Int?
    @Option(parsing: .unconditional, help: "The signature expires this long after the signing time (with --trust).")
    var expires = DurationArgument("180d", seconds: 180 * 86400)
    @Option(name: .shortAndLong, help: "Write the signed bundle here instead.") var output: String?
    @Flag(help: "Replace the -o file if it exists.") var overwrite = false

    func validate() throws {
        try expires.check("--expires", from: DurationArgument("1s", seconds: 1), to: .longest)
        if trust != nil, sequence == nil { throw ValidationError("--trust needs --sequence") }
        if trust == nil, sequence != nil { throw ValidationError("--sequence needs --trust") }
        if let sequence, sequence < 0 { throw ValidationError("--sequence \(sequence): use 0 or more") }
    }

    func run() throws {
        let pair = try BundleSigning.loadPrivate(key)
        var signer = BundleSigning.Signer.singleKey(pair)
        if let trust, let sequence {
            let file = try TrustFile.load(trust)
            let signedAt = try signingTime()
            signer = .trustRoot(
                .init(
                    key: pair, trust: file, sequence: sequence, signedAt: signedAt,
                    expires: signedAt.addingTimeInterval(expires.seconds), now: try trustNow()))
        }
        let digest = try BundleSigning.sign(bundle, signer: signer, output: output, overwrite: overwrite)
        Console.out("\(digest)  \(output ?? bundle)\n")
        Console.note("signed with key \(pair.keyID)")
    }

    /// SOURCE_DATE_EPOCH when set (the same inputs give the same bytes), else now.
    func signingTime() throws -> Date {
        if let text = ProcessInfo.processInfo.environment["SOURCE_DATE_EPOCH"], !text.isEmpty {
            guard let seconds = Int64(text), seconds >= 0 else {
                throw FPError.usage("SOURCE_DATE_EPOCH=\(text): must be whole seconds since 1970")
            }
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        return try trustNow()
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
