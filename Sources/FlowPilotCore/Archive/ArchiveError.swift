/// A libarchive call failed; `message` is libarchive's own explanation.
public struct ArchiveError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}
