import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct TrustCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Keep a trust root: root keys that delegate bundle signing keys, rotated without an app update",
        discussion: """
            trust.json holds every version of the root, oldest first. Each change
            (delegate, revoke, rotate) writes version N+1, signed by a threshold of
            version N's root keys and a threshold of its own, and replaces the file
            atomically. The app embeds a copy; bundle sign --trust carries the whole
            chain in manifest.sig, and bundle validate --trust walks it from the
            copy's version to the newest. fpctl-trust(1) has a rotation walk-through.
            A key option takes a key file (mode 0600; a file others may read is
            refused), env:NAME (the key file's contents in an environment
            variable) or fd:N (read from an open file descriptor).
            Exit status: 0 written, 64 usage error (a key that cannot sign this
            change, a threshold not met), 65 an invalid trust.json or key file,
            66 a file is missing, 73 trust.json cannot be written.
            """,
        subcommands: [TrustInit.self, TrustDelegate.self, TrustRevoke.self, TrustRotate.self, TrustShow.self]
    )
}

/// Whole seconds, as trust.json writes times.
func trustNow() throws -> Date {
    Date(timeIntervalSince1970: (try Now.date()).timeIntervalSince1970.rounded(.down))
}

/// What every change takes: the file, the root keys that sign, and the new version's expiry and minimum sequence.
struct TrustChangeOptions: ParsableArguments {
    @Argument(help: "The trust.json to change (replaced atomically).") var file: String

    @Option(
        name: .customLong("root-key"),
        help: ArgumentHelp(
            "A root key that signs the new version (repeatable): a file, env:NAME or fd:N.", valueName: "key"))
    var rootKeys: [String] = []

    @Option(
        name: .customLong("root-expires"), parsing: .unconditional,
        help: "The new root version expires this long from now.")
    var rootExpires = DurationArgument("365d", seconds: 365 * 86400)

    @Option(
        name: .customLong("min-sequence"),
        help: "The lowest bundle sequence the new version accepts (never lower than the last version's).")
    var minSequence: Int?

    func validate() throws {
        try rootExpires.check("--root-expires", from: DurationArgument("1s", seconds: 1), to: .longest)
        if let minSequence, minSequence < 0 { throw ValidationError("--min-sequence \(minSequence): use 0 or more") }
        if rootKeys.isEmpty { throw ValidationError("give a --root-key to sign the new version") }
    }

    /// Loads the file, applies `change`, writes version N+1 and says so.
    func apply(extraSigners: [SigningKey.Pair] = [], _ change: (inout TrustRoot, Date) throws -> Void) throws {
        let trust = try TrustFile.load(file)
        let now = try trustNow()
        let signers = try rootKeys.map(SigningKey.loadPrivate) + extraSigners
        let next = try TrustChange.next(
            trust, signers: signers,
            common: .init(expires: now.addingTimeInterval(rootExpires.seconds), minSequence: minSequence)
        ) { try change(&$0, now) }
        try write(next, to: file, overwrite: true)
        Console.out("\(file): version \(next.current.version)\n")
    }
}

func write(_ trust: TrustFile, to path: String, overwrite: Bool) throws {
    let out = try AtomicFile.Output(destination: path, overwrite: overwrite, mode: 0o644)
    try out.write(trust.data)
    try out.commit()
}

struct TrustInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Write version 1 of a trust root",
        discussion: """
            Its root keys are the --root-key keys, and all of them sign it; --threshold
            of them must sign each next version. It delegates no signing key yet
            (trust delegate). Refuses to replace an existing file unless --overwrite.
            """
    )

    @Option(name: .shortAndLong, help: "The trust.json to write.") var output: String
    @Option(name: .customLong("app-id"), help: "The app the root is for: its bundles' app_id.") var appID: String
    @Option(
        name: .customLong("root-key"),
        help: ArgumentHelp("A root key (repeatable): a file, env:NAME or fd:N.", valueName: "key"))
    var rootKeys: [String] = []
    @Option(help: "How many root keys must sign each next version.") var threshold = 1
    @Option(parsing: .unconditional, help: "The root expires this long from now.")
    var expires = DurationArgument("365d", seconds: 365 * 86400)
    @Flag(help: "Replace the -o file if it exists.") var overwrite = false

    func validate() throws {
        try expires.check("--expires", from: DurationArgument("1s", seconds: 1), to: .longest)
        if rootKeys.isEmpty { throw ValidationError("give at least one --root-key") }
    }

    func run() throws {
        let keys = try rootKeys.map(SigningKey.loadPrivate)
        let now = try trustNow()
        let trust = try TrustChange.initial(
            appID: appID, rootKeys: keys, threshold: threshold, expires: now.addingTimeInterval(expires.seconds))
        try write(trust, to: output, overwrite: overwrite)
        Console.out("\(output): version 1\n")
    }
}

struct TrustDelegate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delegate",
        abstract: "Delegate bundle signing to a key, from now until --expires",
        discussion: """
            Writes the next root version, with the key (a public key file from bundle
            keygen) among its signing keys. Delegating a key again renews its window.
            A revoked key, or a root key, cannot be delegated.
            """
    )

    @OptionGroup var change: TrustChangeOptions
    @Option(name: .customLong("public-key"), help: "The signing key's public key file.") var publicKey: String
    @Option(parsing: .unconditional, help: "The delegation ends this long from now.")
    var expires = DurationArgument("90d", seconds: 90 * 86400)

    func validate() throws {
        try expires.check("--expires", from: DurationArgument("1s", seconds: 1), to: .longest)
    }

    func run() throws {
        let key = try SigningKey.loadPublic(publicKey)
        try change.apply { root, now in
            try TrustChange.delegate(
                &root, publicKey: key, notBefore: now, expires: now.addingTimeInterval(expires.seconds))
        }
        Console.note("delegated key \(SigningKey.keyID(key))")
    }
}

struct TrustRevoke: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke a signing key",
        discussion: """
            Writes the next root version without the key among its signing keys and
            with it among the revoked: every validator that reaches this version
            refuses the key's bundles (rule signature-key-revoked). Raise
            --min-sequence too, so that bundles the key signed before cannot come back
            under an older root.
            """
    )

    @OptionGroup var change: TrustChangeOptions
    @Option(name: .customLong("key-id"), help: "The signing key's id (16 hex digits).") var keyID: String?
    @Option(name: .customLong("public-key"), help: "Or the signing key's public key file.") var publicKey: String?

    func validate() throws {
        guard (keyID == nil) != (publicKey == nil) else { throw ValidationError("give --key-id or --public-key") }
    }

    func run() throws {
        let id = try keyID ?? SigningKey.keyID(SigningKey.loadPublic(publicKey ?? ""))
        try change.apply { root, _ in try TrustChange.revoke(&root, keyID: id) }
        Console.note("revoked key \(id)")
    }
}

struct TrustRotate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Replace the root keys",
        discussion: """
            Writes the next root version whose root keys are the --new-root-key keys:
            signed by a threshold of the old root keys (--root-key) and a threshold of
            the new ones, so a validator that trusts the old root trusts the new.
            To keep an old root key, give it as a --new-root-key too.
            """
    )

    @OptionGroup var change: TrustChangeOptions
    @Option(
        name: .customLong("new-root-key"),
        help: ArgumentHelp("A root key of the new version (repeatable): a file, env:NAME or fd:N.", valueName: "key"))
    var newRootKeys: [String] = []
    @Option(help: "How many of the new root keys must sign each next version.") var threshold = 1

    func validate() throws {
        if newRootKeys.isEmpty { throw ValidationError("give at least one --new-root-key") }
    }

    func run() throws {
        let keys = try newRootKeys.map(SigningKey.loadPrivate)
        try change.apply(extraSigners: keys) { root, _ in
            try TrustChange.rotate(&root, newKeys: keys, threshold: threshold)
        }
    }
}

struct TrustShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Check a trust root and show its newest version",
        discussion: """
            Checks every version (version 1 signed by its own root keys, each next
            one as a validator walks it) and prints the newest: app id, expiry,
            min_sequence, threshold, every key by id with its role (root, signing,
            revoked) and window, and who signed each version.
            Exit status: 0 valid, 65 invalid (one line naming the rule), 66 missing.
            """
    )

    @Argument(help: "The trust.json to show.") var file: String
    @OptionGroup var output: FormatOption<TrustShowReport>

    func run() throws {
        try output.print(TrustShowReport(file: file, trust: try TrustFile.load(file)))
    }
}
