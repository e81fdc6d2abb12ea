import Foundation
import Testing

/// The man pages (Scripts/man.py writes them from the commands, man/src and two
/// docs): committed pages match what the generator makes now, every page has the
/// sections a user looks for, mandoc finds nothing to say, and every example runs.
@Suite("man pages")
struct ManPageTests {
    static let man = Paths.packageRoot.appendingPathComponent("man").path

    /// Every page, in the order their examples run (later examples use the files
    /// earlier ones write: demo.fpbundle, signing.key, root1.key and trust.json, shard-1.json).
    static let pages = [
        "fpctl", "fpctl-bundle", "fpctl-bundle-build", "fpctl-bundle-validate", "fpctl-bundle-inspect",
        "fpctl-bundle-preview",
        "fpctl-bundle-extract", "fpctl-bundle-keygen", "fpctl-trust", "fpctl-trust-init", "fpctl-trust-delegate",
        "fpctl-bundle-sign", "fpctl-trust-revoke", "fpctl-trust-rotate", "fpctl-trust-show", "fpctl-bundle-pull",
        "fpctl-bundle-diff",
        "fpctl-bundle-schema",
        "fpctl-warm", "fpctl-report", "fpctl-resolve", "fpctl-ready", "fpctl-cache", "fpctl-cache-info",
        "fpctl-cache-list", "fpctl-cache-verify", "fpctl-cache-prune", "fpctl-cache-put", "fpctl-cache-migrate",
        "fpctl-cache-clear",
        "fpctl-serve",
    ]

    func page(_ name: String, section: Int = 1) throws -> String {
        try String(contentsOfFile: "\(Self.man)/man\(section)/\(name).\(section)", encoding: .utf8)
    }

    /// The `.SH` headings of a page, in order.
    func headings(_ text: String) -> [String] {
        text.split(separator: "\n").filter { $0.hasPrefix(".SH ") }.map {
            String($0.dropFirst(4)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
    }

    @Test("the committed pages are what Scripts/man.py makes from the commands now (run Scripts/update-man.sh)")
    func notStale() throws {
        let check = try run(
            try tool("python3"),
            [Paths.packageRoot.appendingPathComponent("Scripts/man.py").path, Paths.fpctl, "--check"])
        #expect(check.status == 0, "\(check.stderr)")
        let generated = try FileManager.default.contentsOfDirectory(atPath: "\(Self.man)/man1").sorted()
        #expect(
            generated == Self.pages.map { "\($0).1" }.sorted(),
            "a command without its page, or a page without its command")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: "\(Self.man)/man5").sorted() == [
                "fpctl-bundle.5", "fpctl-cache.5",
            ])
    }

    @Test(
        "every command page has NAME, SYNOPSIS, DESCRIPTION, OPTIONS with defaults, EXIT STATUS with the codes --help names, EXAMPLES and SEE ALSO"
    )
    func sections() throws {
        for name in Self.pages {
            let text = try page(name)
            let have = headings(text)
            for required in ["NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "EXAMPLES", "SEE ALSO"] {
                #expect(have.contains(required), "\(name)(1) has no \(required)")
            }
            let command = name.split(separator: "-").dropFirst().map(String.init)
            let help = try fpctl(command + ["--help"])
            // Every option --help lists is in OPTIONS, and so is every default it shows.
            for option in Set(help.stdout.matches(of: /(?m)^  (?:-\w, )?--([a-z][a-z-]*)/).map { String($0.1) }) {
                #expect(
                    text.contains("\\fB\\-\\-\(option.replacingOccurrences(of: "-", with: "\\-"))\\fR"),
                    "\(name)(1) lacks --\(option)")
            }
            // Defaults the parser knows become "Default: VALUE"; those an abstract
            // states ("(default: anonymous)") stay in its text.
            let joined = text.replacingOccurrences(of: "\n", with: " ")
            for match in help.stdout.replacingOccurrences(of: "\n", with: " ").matches(of: /\(default: ([^)$]+)\)/) {
                let value = String(match.1).split(whereSeparator: \.isWhitespace).joined(separator: " ")
                #expect(
                    joined.contains("Default: \\fB\(value.replacingOccurrences(of: "-", with: "\\-"))\\fR")
                        || joined.contains("(default: \(value))"),
                    "\(name)(1) does not show the default \(value)")
            }
            // The exit statuses --help's own "Exit status:" names are in EXIT STATUS.
            let exitSection =
                text.components(separatedBy: ".SH EXIT STATUS").dropFirst().first?
                .components(separatedBy: "\n.SH ").first ?? ""
            if let said = help.stdout.components(separatedBy: "Exit status:").dropFirst().first?
                .components(separatedBy: ".\n").first  // the sentence
            {
                for code in said.matches(of: /\b(0|1|3|6[4-9]|73)\b/).map({ String($0.1) }) {
                    #expect(
                        exitSection.contains("\\fB\(code)\\fR"),
                        "\(name)(1): --help names exit \(code), EXIT STATUS does not")
                }
            }
        }
        let warm = headings(try page("fpctl-warm"))
        #expect(warm.contains("OUTPUT") && warm.contains("ENVIRONMENT") && warm.contains("FILES"))
    }

    @Test("the section-5 pages say what docs/bundle-format.md and docs/cache-format.md say, heading by heading")
    func formatPages() throws {
        for (name, doc) in [("fpctl-bundle", "docs/bundle-format.md"), ("fpctl-cache", "docs/cache-format.md")] {
            let markdown = try String(
                contentsOfFile: Paths.packageRoot.appendingPathComponent(doc).path, encoding: .utf8)
            let text = try page(name, section: 5)
            let docHeadings = markdown.split(separator: "\n").filter { $0.hasPrefix("## ") }.map {
                $0.dropFirst(3).uppercased()
            }
            #expect(!docHeadings.isEmpty)
            #expect(
                Array(headings(text).dropFirst(2).dropLast()) == docHeadings, "\(name)(5) and \(doc) differ in sections"
            )
        }
    }

    @Test(
        "fpctl-bundle(5) and fpctl-cache(5) as groff and mandoc render them: every code span of the docs whole, every table with the docs' columns"
    )
    func formatPagesRender() throws {
        for (name, doc) in [("fpctl-bundle", "docs/bundle-format.md"), ("fpctl-cache", "docs/cache-format.md")] {
            let markdown = try String(
                contentsOfFile: Paths.packageRoot.appendingPathComponent(doc).path, encoding: .utf8)
            let page = "\(Self.man)/man5/\(name).5"
            // Wide enough that no table cell wraps, so a formula or pattern reads whole.
            let renderers = [
                ("groff", try tool("groff"), ["-k", "-t", "-man", "-Tutf8", "-rLL=250n", page]),
                ("mandoc", try tool("mandoc"), ["-Tutf8", "-Owidth=250", page]),
            ]
            let (spans, columns) = Self.markdownFacts(markdown)
            #expect(spans.contains("^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$") || name != "fpctl-bundle")
            for (renderer, executable, arguments) in renderers {
                let rendered = try run(executable, arguments)
                #expect(rendered.status == 0, "\(renderer) \(name)(5): \(rendered.stderr)")
                let text = Self.plain(rendered.stdout)
                let flat = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                for span in spans {
                    #expect(flat.contains(span), "\(renderer) \(name)(5) does not show `\(span)` from \(doc)")
                }
                #expect(Self.tableColumns(text) == columns, "\(renderer) \(name)(5): table columns differ from \(doc)")
            }
        }
    }

    /// Text without overstrikes (bold `X\bX`, underline `_\bX`).
    static func plain(_ text: String) -> String {
        var out: [Character] = []
        for ch in text {
            if ch == "\u{8}" {
                _ = out.popLast()
            } else {
                out.append(ch)
            }
        }
        return String(out)
    }

    /// A Markdown document's code spans (whitespace collapsed, `\|` read as `|`,
    /// none from code blocks) and the number of columns of each table, in order.
    static func markdownFacts(_ markdown: String) -> (spans: [String], columns: [Int]) {
        var spans: [String] = []
        var columns: [Int] = []
        var inBlock = false
        var inTable = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inBlock.toggle() }
            if inBlock || line.hasPrefix("    ") { continue }
            let isRow = line.hasPrefix("|")
            if isRow && !inTable {
                columns.append(
                    line.replacingOccurrences(of: "\\|", with: "").trimmingCharacters(in: .whitespaces)
                        .dropFirst().dropLast().split(separator: "|", omittingEmptySubsequences: false).count)
            }
            inTable = isRow
            for match in line.matches(of: /`([^`]+)`/) {
                let span = String(match.1).replacingOccurrences(of: "\\|", with: "|")
                spans.append(span.split(whereSeparator: \.isWhitespace).joined(separator: " "))
            }
        }
        return (spans, columns)
    }

    /// The number of columns of each boxed table in rendered text, in order: a
    /// border is a line of `+`/`-` or of box-drawing characters, and its
    /// junctions less one are the columns; a table is a run of borders and rows.
    static func tableColumns(_ text: String) -> [Int] {
        let junctions = Set("+┌┬┐├┼┤└┴┘")
        let borders = junctions.union("-─")
        var columns: [Int] = []
        var inTable = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            let border = !trimmed.isEmpty && trimmed.allSatisfy { borders.contains($0) }
            if border && !inTable { columns.append(trimmed.filter { junctions.contains($0) }.count - 1) }
            inTable = border || (inTable && (trimmed.hasPrefix("|") || trimmed.hasPrefix("│")))
        }
        return columns
    }

    @Test("mandoc -Tlint -W style finds nothing in any page")
    func lintClean() throws {
        let pages =
            try FileManager.default.contentsOfDirectory(atPath: "\(Self.man)/man1").map { "\(Self.man)/man1/\($0)" }
            + FileManager.default.contentsOfDirectory(atPath: "\(Self.man)/man5").map { "\(Self.man)/man5/\($0)" }
        let lint = try run(try tool("mandoc"), ["-Tlint", "-W", "style"] + pages)
        #expect(lint.stdout + lint.stderr == "")
    }

    @Test("no page shows a Markdown backtick outside a literal block (a code span split across source lines)")
    func noStrayBackticks() throws {
        for section in ["man1", "man5"] {
            for name in try FileManager.default.contentsOfDirectory(atPath: "\(Self.man)/\(section)") {
                var literal = false
                let text = try String(contentsOfFile: "\(Self.man)/\(section)/\(name)", encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    if line.hasPrefix(".nf") { literal = true } else if line.hasPrefix(".fi") { literal = false }
                    #expect(literal || !line.contains("`"), "\(section)/\(name):\(number + 1): \(line)")
                }
            }
        }
    }

    @Test("every EXAMPLES command runs and exits 0, against the sample bundles and a local fpctl serve")
    func examples() throws {
        let work = try TemporaryDirectory()
        try FileManager.default.createSymbolicLink(
            atPath: work.file("bundles"), withDestinationPath: Paths.packageRoot.appendingPathComponent("bundles").path)
        let server = try ServeProcess([Paths.sample("demo"), "-q", "--rewrite-asset-urls"])
        let bin = URL(fileURLWithPath: Paths.fpctl).deletingLastPathComponent().path
        let environment = [
            "PATH": "\(bin):\(ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")",
            "FPCTL_CACHE_DIR": "cache", "FLOWPILOT_API_KEY": "k_examples",
        ]
        let sources = try FileManager.default.contentsOfDirectory(
            atPath: Paths.packageRoot.appendingPathComponent("man/src").path
        ).filter { $0.hasPrefix("fpctl") }
        #expect(Set(sources) == Set(Self.pages.map { "\($0).md" }), "a man/src page missing from the examples' order")
        var ran = 0
        for name in Self.pages {
            let source = try String(
                contentsOfFile: Paths.packageRoot.appendingPathComponent("man/src/\(name).md").path, encoding: .utf8)
            let examples =
                source.components(separatedBy: "## EXAMPLES").dropFirst().first?
                .components(separatedBy: "\n## ").first ?? ""
            let commands = examples.split(separator: "\n").filter { $0.hasPrefix("    $ ") }.map { $0.dropFirst(6) }
            #expect(!commands.isEmpty, "\(name): no example")
            for command in commands {
                let line = command.replacingOccurrences(of: "http://localhost:8080", with: server.url)
                if line.hasPrefix("fpctl serve ") {
                    let serve = try ServeProcess(
                        line.dropFirst("fpctl serve ".count).split(separator: " ").map(String.init)
                            .filter { $0 != "--port" && $0 != "0" }
                            .map { $0.hasPrefix("bundles/") ? work.file($0) : $0 })
                    #expect(serve.stop() == 0, "\(name): \(command)")
                } else {
                    // `… # exit 73`: an example of a refusal, with the status it documents.
                    let expected = line.components(separatedBy: "# exit ").dropFirst().first.flatMap { Int32($0) } ?? 0
                    let result = try run(
                        "/bin/sh", ["-c", line], environment: environment, currentDirectory: work.path)
                    #expect(result.status == expected, "\(name): \(command)\n\(result.stderr)\n\(result.stdout)")
                }
                ran += 1
            }
        }
        #expect(ran >= Self.pages.count)
    }
}
