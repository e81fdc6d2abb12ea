/// A rule `bundle build`, `bundle validate` and `bundle diff` check: its
/// stable id (what a finding names, and what SARIF, JUnit and GitLab reports
/// carry), the level it reports at, a one-line summary and what to do about
/// it. The same table is fpctl-bundle(5)'s RULES section (docs/bundle-format.md,
/// "Rules"); a test keeps the two equal and every rule the code reports in it.
public struct Rule: Sendable, Equatable {
    public let id: String
    public let level: Finding.Severity
    public let summary: String
    public let help: String

    init(_ id: String, _ summary: String, _ help: String) {
        (self.id, self.level, self.summary, self.help) = (id, .error, summary, help)
    }

    public init(_ id: String, _ level: Finding.Severity, _ summary: String, _ help: String) {
        (self.id, self.level, self.summary, self.help) = (id, level, summary, help)
    }

    /// Where a person reads about every rule: fpctl-bundle(5), section RULES.
    public static let manual = "man:fpctl-bundle(5)#RULES"

    /// The rule of an id, or nil for one fpctl does not have.
    public static func named(_ id: String) -> Rule? { byID[id] }

    private static let byID = Dictionary(uniqueKeysWithValues: all.map { ($0.id, $0) })

    /// Every rule, grouped as the checks run: source, flow, zip, manifest,
    /// limits, media, signature, bundle, diff.
    public static let all: [Rule] = [
        // A bundle source directory (bundle build; validate and diff with --source).
        Rule(
            "source-json", "bundle.json is not valid JSON",
            "Fix the JSON syntax at the line and column given."),
        Rule(
            "source-field", "a bundle.json field is missing or has the wrong type",
            "app_id must be a non-empty string, placements an object with at least one placement, created_at an RFC 3339 time before 2108."
        ),
        Rule(
            "source-path", "a bundle.json path leaves the source directory",
            "Every flow and asset path must be relative, without '..', '\\' or empty components."),
        Rule(
            "source-placement-key", "a placement key cannot name a bundle entry",
            "Use lowercase letters, digits, '.', '_' and '-' in placement keys."),
        Rule(
            "source-missing-file", "a file bundle.json names is not there",
            "Add the file, or correct its path in bundle.json."),
        Rule(
            "source-missing-asset", "a flow references media with no local copy",
            "Map the URL to a file under assets in bundle.json (bundle pull does this)."),
        Rule(
            "source-symlink", "a symbolic link in the source",
            "Replace the link with the file itself; a link could pull a host file into a signed bundle."),
        Rule(
            "source-special-file", "a device, FIFO or socket in the source",
            "A bundle source holds regular files and directories only."),
        Rule(
            "source-font-conflict", "two flows declare one font name with different URLs",
            "Give each font one URL across the flows, or rename one of them."),
        Rule(
            "source-font-hash", "a font file's SHA-256 is not the one its flow declares",
            "Replace the font file, or correct the sha256 the flow declares."),
        Rule(
            "source-unreferenced-asset", .warning, "an asset no flow uses",
            "It is left out of the bundle; remove it from bundle.json#/assets."),
        Rule(
            "rule-not-run", .warning, "a rule could not run, because of an error beside it",
            "The finding names the rule and the error that stopped it; fix that error and the rule runs."),
        // A flow document (flow schema v1).
        Rule(
            "flow-json", "a flow is not valid JSON",
            "Fix the JSON syntax at the line and column given (duplicate keys are refused too)."),
        Rule("flow-type", "a flow is not a JSON object", "A flow document is one JSON object."),
        Rule(
            "flow-schema-version", "schema_version is missing or not one this fpctl reads",
            "Set schema_version to 1, or upgrade fpctl for a newer schema."),
        Rule(
            "flow-field", "a required string is missing or empty",
            "id, version and each screen's id are non-empty strings."),
        Rule(
            "flow-field-type", "a field has the wrong type",
            "A text or button's text is a string; experiment is an object whose id and variant are strings."),
        Rule(
            "flow-content-hash", "content_hash does not match the document",
            "Recompute it: sha256 of the canonical JSON without content_hash, or remove the field."),
        Rule("flow-screens", "screens is missing or empty", "A flow needs a non-empty array of screens."),
        Rule("flow-screen", "a screen is not an object", "Each element of screens is an object."),
        Rule(
            "flow-duplicate-screen", "two screens share an id",
            "Screen ids are unique within a flow; navigate actions name them."),
        Rule(
            "flow-zones", "persistent_zones is not an object", "persistent_zones maps zone names to component arrays."),
        Rule("flow-components", "components is not an array", "components holds an array of components."),
        Rule(
            "flow-component", "a component is not an object or has no type",
            "Each component is an object with a string type."),
        Rule(
            "flow-component-type", .warning, "a component type this fpctl does not know",
            "Older SDKs skip unknown components; check the type's spelling."),
        Rule(
            "flow-media-src", "an image, lottie or video src is not an absolute http(s) URL",
            "Use an absolute http or https URL with a host."),
        Rule("flow-fonts", "fonts is not an array", "fonts holds an array of font declarations."),
        Rule(
            "flow-font-url", "a font has no absolute http(s) url", "Each font declares an absolute http or https url."),
        Rule(
            "flow-font-sha256", "a font's sha256 is not 64 lowercase hex digits",
            "Write the font file's SHA-256 in lowercase hex."),
        Rule(
            "flow-font-undeclared", "a component uses a font not declared in fonts",
            "Declare the font in /fonts, or use one that is."),
        Rule(
            "flow-action", "an action is incomplete or of an unknown type",
            "purchase needs product_id, navigate screen, open_link an absolute url, call_delegate message."),
        Rule(
            "flow-navigate", "navigate targets a screen that does not exist",
            "Name an existing screen id, or add the screen."),
        // The archive's bytes (fpctl-bundle(5)).
        Rule("zip-structure", "the zip directory is malformed", "Rebuild the bundle with fpctl bundle build."),
        Rule("zip-truncated", "the file ends early", "The bundle was cut short; copy or download it again."),
        Rule(
            "zip-corrupt", "an entry's data does not decompress or match its CRC-32",
            "The bundle is damaged; build it again."),
        Rule("zip-trailing-bytes", "bytes after the end record", "A canonical bundle ends with its end record."),
        Rule("zip-comment", "an archive comment", "A canonical bundle has no comment."),
        Rule("zip-zip64", "a zip64 record", "A bundle never needs zip64; it is refused."),
        Rule("zip-gap", "bytes between entries", "Entries follow each other with nothing between them."),
        Rule("zip-overlap", "entries overlap", "Each entry's bytes belong to it alone."),
        Rule("zip-local-header", "a local header is missing or unreadable", "Rebuild the bundle."),
        Rule(
            "zip-local-header-mismatch", "a local header disagrees with its central record",
            "Rebuild the bundle; readers that trust one or the other would see different files."),
        Rule(
            "zip-noncanonical-header", "an entry header is not the canonical one",
            "Rebuild with fpctl bundle build: canonical headers make bundles byte-identical."),
        Rule("zip-method", "a compression method other than store or deflate", "Only store and deflate are read."),
        Rule("zip-encrypted", "an encrypted entry", "Bundles are not encrypted."),
        Rule(
            "zip-size-mismatch", "an entry's size differs from the one recorded",
            "The bundle is damaged; build it again."),
        Rule("zip-entry-type", "an entry that is not a regular file", "Bundles hold regular files only."),
        Rule("zip-entry-mode", "an entry's unix mode is not 0644", "Rebuild the bundle; every entry is mode 0644."),
        Rule("zip-path-absolute", "an absolute entry path", "Entry paths are relative."),
        Rule(
            "zip-path-traversal", "an entry path with '..'",
            "An entry must not escape the directory it is extracted into."),
        Rule("zip-path-backslash", "an entry path with a backslash", "Use '/' between path components."),
        Rule("zip-path-length", "an entry path that is too long", "Shorten the path."),
        Rule(
            "zip-path-noncanonical", "an entry path outside the canonical form",
            "Paths match ^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$."),
        Rule("zip-duplicate-path", "two entries with one path", "Each path appears once."),
        Rule(
            "zip-case-collision", "two paths that differ only in case", "They collide on case-insensitive file systems."
        ),
        Rule(
            "zip-prefix-conflict", "a path is both a file and a directory",
            "No entry's path is a prefix directory of another's."),
        Rule(
            "zip-order", "entries are not sorted by path",
            "Rebuild the bundle; entries are in byte order of their paths."),
        // manifest.json.
        Rule("manifest-missing", "the bundle has no manifest.json", "Build the bundle with fpctl bundle build."),
        Rule(
            "manifest-order", "manifest.json (or manifest.sig) is not where it belongs",
            "manifest.json is the first entry, manifest.sig the second."),
        Rule("manifest-json", "manifest.json is not a JSON object", "Rebuild the bundle."),
        Rule("manifest-format", "format is not \"fpbundle\"", "This is not a bundle fpctl wrote."),
        Rule(
            "manifest-format-version", "a format_version this fpctl does not read",
            "Upgrade fpctl, or rebuild the bundle."),
        Rule("manifest-field", "a manifest field is missing or has the wrong type", "Rebuild the bundle."),
        Rule(
            "manifest-placement", "a placement's entry is missing or misnamed",
            "Each placement's flow is flows/<key>.json."),
        Rule("manifest-missing-file", "a file the manifest lists is not in the archive", "Rebuild the bundle."),
        Rule(
            "manifest-unlisted-file", "an entry the manifest does not list",
            "Every entry but the manifest is listed in files."),
        Rule("manifest-size-mismatch", "an entry's size differs from the manifest's", "Rebuild the bundle."),
        Rule(
            "manifest-hash-mismatch", "an entry's SHA-256 differs from the manifest's",
            "Rebuild the bundle; it was changed after it was built."),
        // Limits.
        Rule("limit-entries", "too many entries", "A bundle holds at most the entries fpctl-bundle(5) allows."),
        Rule("limit-entry-size", "an entry over the size limit", "Make the file smaller."),
        Rule("limit-total-size", "the bundle's content over the size limit", "Ship fewer or smaller media."),
        Rule("limit-json-size", "a JSON document over the size limit", "Make the flow smaller."),
        Rule("limit-compression-ratio", "an entry that expands too far", "A zip bomb is refused; rebuild the bundle."),
        // Media and fonts.
        Rule(
            "media-type-mismatch", "a media or font file is not what its extension says",
            "Give the file its real extension, or replace it (checked by its first bytes)."),
        Rule(
            "media-corrupt", "a media file whose structure is broken",
            "Replace the file; the phone could not decode it."),
        // Signature.
        Rule("signature-missing", "the bundle is not signed", "Sign it with fpctl bundle sign."),
        Rule("signature-invalid", "manifest.sig does not verify with the key", "Sign it again with the right key."),
        Rule(
            "signature-unknown-key", "manifest.sig is by another key",
            "The bundle was signed with a key other than --public-key, or one the trust root does not delegate to; sign it with the release key, or delegate the key (fpctl trust delegate)."
        ),
        Rule(
            "signature-form", "manifest.sig is in the single-key form where a trust root is required",
            "validate --trust needs the trust-root form (app id, sequence, expiry); sign again with bundle sign --trust."
        ),
        Rule(
            "signature-key-revoked", "manifest.sig is by a key the trust root revoked",
            "Sign with a key the root delegates to now; a revoked key stays revoked."),
        Rule(
            "signature-key-expired", "manifest.sig is by a key outside its delegation window",
            "Delegate the key again with a new window (fpctl trust delegate), or sign with a current key."),
        Rule(
            "signature-wrong-app", "the signed statement or manifest is for another app than the trust root",
            "Sign the app's own bundle, with the app's trust root."),
        Rule("signature-expired", "the signature is past its expiry", "Sign the bundle again (bundle sign --expires)."),
        Rule(
            "signature-future", "the signature was made later than the validator's clock allows",
            "signed_at is more than 5 minutes ahead of now: fix the signing machine's clock (or SOURCE_DATE_EPOCH) and sign again, or the validator's."
        ),
        Rule(
            "signature-rollback", "the bundle's sequence is below the lowest accepted",
            "An older bundle than the app already trusts: ship the newest one, signed with a higher --sequence."),
        Rule(
            "trust-root-format", "a trust root or its chain is not what fpctl trust writes",
            "Use the trust.json fpctl trust wrote; a field names what is wrong."),
        Rule(
            "trust-root-version", "a root version does not follow the one before it by 1",
            "Carry every root version from the app's to the newest, in order (bundle sign --trust does)."),
        Rule(
            "trust-root-threshold", "a root version lacks the signatures its threshold needs",
            "Version N+1 needs a threshold of version N's root keys and of its own, each key counted once."),
        Rule(
            "trust-root-expired", "the newest trust root is past its expiry",
            "Make a new root version (every fpctl trust change sets its expiry, --root-expires) and sign the bundle again."
        ),
        // The bundle as a whole.
        Rule("bundle-asset-name", "an asset is not named by its SHA-256", "Rebuild the bundle."),
        Rule(
            "bundle-missing-media", "a flow's image is not in the bundle",
            "Add a local copy of the image to the source and rebuild."),
        Rule(
            "bundle-missing-font", "a flow's font is not in the bundle",
            "Add a local copy of the font to the source and rebuild."),
        Rule(
            "bundle-font-hash", "a font differs from the SHA-256 its flow declares", "Rebuild with the declared font."),
        Rule("bundle-unreferenced-asset", .warning, "an asset no flow references", "Rebuild the bundle to drop it."),
        Rule("bundle-unreferenced-flow", .warning, "a flow no placement uses", "Rebuild the bundle to drop it."),
        Rule(
            "bundle-age", .warning, "the bundle is older than --max-age",
            "Pull and build it again, so the app does not ship a stale default (an error in bundle diff)."),
        // What the backend serves now (bundle diff).
        Rule(
            "diff-changed", "the backend serves another flow for this placement",
            "Run bundle pull and build again, so the bundled default is what users get live."),
        Rule(
            "diff-missing-in-bundle", "the backend serves a placement the bundle lacks",
            "Add the placement to bundle.json (bundle pull) and build again."),
        Rule(
            "diff-missing-on-backend", "the bundle has a placement the backend no longer serves",
            "Remove it from the bundle, or restore it on the backend."),
        Rule(
            "diff-failed", "the live resolve of a placement failed",
            "The backend answered with an error; the placement could not be compared."),
    ]
}
