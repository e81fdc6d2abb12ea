import ArgumentParser
import FlowPilotCore

struct BundleSchema: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Print the JSON Schema of a flow or of a bundle source's bundle.json",
        discussion: """
            Prints a JSON Schema (draft 2020-12), the one the repository keeps in
            schemas/: flow for a flow document (a source's flows/*.json, a resolve
            answer's flow), bundle for a source's bundle.json. An editor or a JSON
            linter checks a file against it as it is typed; bundle validate checks
            the same types, and what a schema cannot (content hashes, navigate
            targets, declared fonts, unique screen ids, the files themselves).
            """
    )

    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case flow, bundle
    }

    @Argument(help: "flow or bundle.") var kind: Kind

    func run() throws {
        switch kind {
        case .flow: Console.out(BundleSchemas.flow + "\n")
        case .bundle: Console.out(BundleSchemas.bundle + "\n")
        }
    }
}
