import Foundation
import Testing

/// One `--format` option (`FormatOption<Result>`): each command takes exactly
/// its result's formats, and its help and completion name those (#63).
@Suite("--format takes and names its result's formats")
struct FormatOptionTests {
    @Test(
        "a format the result lacks is a usage error (64) before any work; the help names only what is taken",
        arguments: [
            (["trust", "show", "trust.json"], "text (or table, the same) or json"),
            (
                ["resolve", "paywall", "--api-url", "http://127.0.0.1:9", "--app-id", "demo"],
                "text (or table, the same) or json"
            ),
        ])
    func lacking(command: [String], named: String) throws {
        let tmp = try TemporaryDirectory()
        let r = try fpctl(command + ["--format", "csv"], currentDirectory: tmp.path)
        #expect(r.status == 64, "\(command): \(r.status) \(r.stderr)")
        #expect(r.stderr.contains("--format csv: this command prints text or json"), "\(r.stderr)")
        let help = try fpctl(Array(command.prefix(command[0] == "resolve" ? 1 : 2)) + ["--help"])
        let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(words.contains("Output format: \(named). (values: text, json; default: text)"), "\(help.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.path).isEmpty, "nothing written")
    }

    @Test("a result with every format takes csv, and its help says so")
    func every() throws {
        let tmp = try TemporaryDirectory()
        let info = try fpctl("cache", "info", "--cache-dir", tmp.file("cache"), "--format", "csv")
        #expect(info.status == 0 || info.status == 66, "\(info.stderr)")
        #expect(!info.stderr.contains("--format"), "\(info.stderr)")
        let help = try fpctl("cache", "info", "--help")
        let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(
            words.contains("Output format: text (or table, the same), json or csv. (values: text, json, csv;"),
            "\(help.stdout)")
    }

    @Test("one option for every command: a findings command offers the CI formats, any other refuses them (64)")
    func findings() throws {
        let help = try fpctl("bundle", "validate", "--help")
        let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(
            words.contains(
                "Output format: text (or table, the same), json, sarif, github, junit or gitlab. (values: text, json, sarif, github, junit, gitlab; default: text)"
            ), "\(help.stdout)")
        let tmp = try TemporaryDirectory()
        let info = try fpctl("cache", "info", "--cache-dir", tmp.file("cache"), "--format", "sarif")
        #expect(info.status == 64, "\(info.stderr)")
        #expect(info.stderr.contains("--format sarif: this command prints text, json or csv"), "\(info.stderr)")
        let validate = try fpctl("bundle", "validate", tmp.file("none"), "--format", "csv")
        #expect(validate.status == 64, "\(validate.stderr)")
        #expect(
            validate.stderr.contains("--format csv: bundle validate prints text, json, sarif"), "\(validate.stderr)")
    }
}
