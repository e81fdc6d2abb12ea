import FlowPilotCore
import Foundation

/// How a result is printed: `text` for people (`table` is accepted as another
/// name for it: the two meant the same), `json` and `csv` for machines.
public enum OutputFormat: String, Sendable, CaseIterable {
    case text, json, csv

    /// `text`, `table` (the same), `json` or `csv`.
    public init?(name: String) {
        if name == "table" { self = .text } else { self.init(rawValue: name) }
    }
}

/// A result a command prints, rendering itself in every format it has: the
/// one renderer per result and format (as SwiftPM's dumpers are), so a
/// command parses, calls the core and hands the result here. `Entry` never
/// sees a format.
public protocol Rendering: OffersFormats {
    associatedtype Document: Encodable
    /// What `--format text` prints.
    func text() -> String
    /// What `--format csv` prints; nil for a result that is not a table
    /// (`formats` leaves csv out).
    var table: Table? { get }
    /// The JSON document (`JSONOutput` adds `schema_version`).
    var document: Document { get }
}

/// A result's formats: what its command's `--format` takes, names in its help
/// and completes (fpctl's `FormatOption`). Every format by default.
public protocol OffersFormats {
    /// Its plain formats: text, and json and csv where it has them.
    static var formats: [OutputFormat] { get }
    /// Every format `--format` takes for it: the plain ones, and the CI
    /// formats for a findings result (`FindingsRendering`).
    static var reportFormats: [ReportFormat] { get }
    /// Why `--format` refuses `format` for it (one line), nil when it takes it.
    static func unsupported(_ format: ReportFormat) -> String?
}

extension OffersFormats {
    public static var formats: [OutputFormat] { OutputFormat.allCases }

    public static var reportFormats: [ReportFormat] { formats.map { .plain($0) } }

    public static func unsupported(_ format: ReportFormat) -> String? {
        guard !reportFormats.contains(format) else { return nil }
        let names = formats.map(\.rawValue)
        let list =
            names.count < 2
            ? names.joined() : names.dropLast().joined(separator: ", ") + " or " + names[names.count - 1]
        return "--format \(format.name): this command prints \(list)"
    }
}

extension FlowListing: OffersFormats {}

extension Rendering {
    public var table: Table? { nil }

    /// The result as `format` prints it.
    public func rendered(as format: OutputFormat) throws -> String {
        switch format {
        case .text: return text()
        case .json: return try JSONOutput.string(document)
        case .csv:
            guard let table else { throw FPError.usage("--format csv: this result is not a table; use text or json") }
            return table.csv()
        }
    }
}

/// JSON output for machines, every document in the one layout of
/// `JSONDocument` (sorted keys, compact, rows one per line, `schema_version`
/// added once, there). Report types name their fields in camelCase; the
/// documents use snake_case; times are RFC 3339 (`JSONValueEncoder`).
public enum JSONOutput {
    public static let schemaVersion = JSONDocument.schemaVersion

    public static func string<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try data(value), as: UTF8.self)
    }

    public static func data<T: Encodable>(_ value: T) throws -> Data {
        // Straight to a value (`JSONValueEncoder`: snake-case keys, RFC 3339 dates; values
        // already in JSON keep their keys), then the one layout: no JSON text in between.
        guard case .object(let members) = try JSONValueEncoder.encode(value) else {
            preconditionFailure("a JSON document is an object")
        }
        return JSONDocument.data(members)
    }

    /// A document made of values already in hand.
    public static func data(_ members: [ExactName: JSONValue]) -> Data { JSONDocument.data(members) }
}
