import Foundation

/// Who a flow is resolved for: a user id plus targeting attributes
/// (string keys, their bytes; string, number or boolean values).
public struct Identity: Sendable, Hashable, Codable {
    public let userID: String
    public let attributes: [ExactName: JSONValue]
    /// Lowercase hex SHA-256 of `{"attributes":{…},"user_id":"…"}` in canonical
    /// JSON. Computed once: a warm asks for it for every placement it touches.
    public let fingerprint: String

    public init(userID: String, attributes: [ExactName: JSONValue] = [:]) {
        self.userID = userID
        self.attributes = attributes
        // `{"attributes":…,"user_id":…}` in canonical JSON, written member by member in key order.
        var document = CanonicalJSON.SortedObject(capacity: 64 + userID.utf8.count)
        if attributes.isEmpty {
            document.raw("attributes", "{}".utf8)
        } else {
            document.raw("attributes", CanonicalJSON.data(.object(attributes)))
        }
        document.string("user_id", userID)
        self.fingerprint = Digest.sha256Hex(document.finishBytes())
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case attributes
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            userID: try container.decode(String.self, forKey: .userID),
            attributes: try container.decodeIfPresent(JSONValue.self, forKey: .attributes)?.objectValue ?? [:])
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(userID, forKey: .userID)
        try container.encode(JSONValue.object(attributes), forKey: .attributes)
    }

    public static func == (a: Identity, b: Identity) -> Bool { a.fingerprint.sameBytes(as: b.fingerprint) }
    public func hash(into hasher: inout Hasher) { hasher.combine(fingerprint) }
}

extension JSONValue: Hashable {
    public func hash(into hasher: inout Hasher) {
        hasher.combine(CanonicalJSON.data(self))
    }
}
