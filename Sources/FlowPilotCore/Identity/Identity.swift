import Foundation

/// Who a flow is resolved for: a user id plus targeting attributes
/// (string keys; string, number or boolean values).
public struct Identity: Sendable, Hashable, Codable {
    public var userID: String
    public var attributes: [String: JSONValue]

    public init(userID: String, attributes: [String: JSONValue] = [:]) {
        self.userID = userID
        self.attributes = attributes
    }

    /// Lowercase hex SHA-256 of `{"attributes":{…},"user_id":"…"}` in canonical JSON.
    public var fingerprint: String {
        Digest.sha256Hex(CanonicalJSON.data(.object(["attributes": .object(attributes), "user_id": .string(userID)])))
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case attributes
    }
}

extension JSONValue: Hashable {
    public func hash(into hasher: inout Hasher) {
        hasher.combine(CanonicalJSON.data(self))
    }
}
