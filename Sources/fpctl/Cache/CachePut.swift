import ArgumentParser
import FlowPilotCore
import Foundation

struct CachePut: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Write flows and images into a cache from JSON Lines, as the SDK would",
        discussion: """
            Each line is a flow entry, {"placement", "user_id", "attributes",
            "ttl_seconds", "flow" or "flow_file", "resolved_at"?}, or an image,
            {"image_url", "image_file"}.
            Flows are validated before they are written; an invalid line is reported
            (exit 65) and the lines before it stay written.
            The directory is created when missing.
            """
    )

    @OptionGroup var cache: CacheDirOption
    @Option(help: "JSON Lines file, or - for standard input.") var input: String = "-"

    func run() throws {
        // The input first: a path that cannot be read must not leave a new, empty cache behind.
        let handle =
            input == "-" ? FileHandle.standardInput : try InputFile.handle(input, "put input", kind: .stream)
        let store = try cache.open(create: true)
        var flowFiles: [String: FlowDocument] = [:]
        var imageFiles: [String: Data] = [:]
        var count = 0
        try JSONLines.forEach(handle, name: input) { lineNumber, json in
            let at = "\(input):\(lineNumber)"
            if let url = json["image_url"]?.stringValue {
                guard let file = json["image_file"]?.stringValue,
                    let data = imageFiles[file] ?? FileManager.default.contents(atPath: file)
                else {
                    throw FPError.invalid([.error("put-image", at, "image_file missing or unreadable")])
                }
                imageFiles[file] = data
                try store.storeImage(url: url, data: data)
            } else {
                guard let placement = json["placement"]?.stringValue, let user = json["user_id"]?.stringValue else {
                    throw FPError.invalid([
                        .error("put-field", at, "a flow line needs placement and user_id strings")
                    ])
                }
                var doc: FlowDocument?
                if let file = json["flow_file"]?.stringValue {
                    if flowFiles[file] == nil, let data = FileManager.default.contents(atPath: file) {
                        flowFiles[file] = FlowDocument.validate(data: data, location: file).0
                    }
                    doc = flowFiles[file]
                } else if let flow = json["flow"] {
                    doc = FlowDocument.validate(flow, location: at).0
                }
                guard let doc else { throw FPError.invalid([.error("put-flow", at, "flow missing or invalid")]) }
                let identity = Identity(userID: user, attributes: json["attributes"]?.objectValue ?? [:])
                let resolvedAt = json["resolved_at"]?.stringValue.flatMap(RFC3339.parse) ?? Date()
                try store.storeFlow(
                    placement: placement, identity: identity, document: doc,
                    ttlSeconds: Int(json["ttl_seconds"]?.numberValue ?? 300), tier: .network, resolvedAt: resolvedAt
                )
            }
            count += 1
        }
        Console.note("wrote \(count) entries to \(store.root)")
    }
}
