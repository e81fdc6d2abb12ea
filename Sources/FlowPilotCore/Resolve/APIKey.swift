import Foundation

/// Where the API key comes from: a file (`--api-key-file`) or
/// `FLOWPILOT_API_KEY`. It goes only into an Authorization header; it is never
/// printed, logged, cached or put in an error message.
public enum APIKey {
    public static let environmentVariable = "FLOWPILOT_API_KEY"

    /// The key in `path`, surrounding whitespace trimmed. A missing file is
    /// `inputMissing`; an empty one is a usage error (it would send no key).
    public static func read(file path: String) throws -> String {
        let data = try InputFile.contents(path, "API key file")
        let key = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !key.isEmpty else { throw FPError.usage("\(path): the API key file is empty") }
        return key
    }

    /// `FLOWPILOT_API_KEY`, when set and not empty.
    public static func fromEnvironment() -> String? {
        ProcessInfo.processInfo.environment[environmentVariable].flatMap { $0.isEmpty ? nil : $0 }
    }
}
