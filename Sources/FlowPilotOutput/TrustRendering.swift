import FlowPilotCore
import Foundation

/// `trust show`: the newest root version, and the versions before it.
public struct TrustShowReport: Rendering {
    public struct Key: Encodable {
        let keyID: String
        let role: String
        let notBefore: String?
        let expires: String?
        enum CodingKeys: String, CodingKey {
            case keyID = "key_id"
            case role
            case notBefore = "not_before"
            case expires
        }
    }

    public struct Version: Encodable {
        let version: Int
        let signedBy: [String]
        enum CodingKeys: String, CodingKey {
            case version
            case signedBy = "signed_by"
        }
    }

    public struct Document: Encodable {
        let file: String
        let appID: String
        let version: Int
        let expires: String
        let minSequence: Int
        let threshold: Int
        let keys: [Key]
        let versions: [Version]
        enum CodingKeys: String, CodingKey {
            case file
            case appID = "app_id"
            case version, expires
            case minSequence = "min_sequence"
            case threshold, keys, versions
        }
    }

    public static var formats: [OutputFormat] { [.text, .json] }
    public let document: Document

    public init(file: String, trust: TrustFile) {
        let root = trust.current
        var keys = CanonicalJSON.sortedKeys(root.rootKeys.keys).map {
            Key(keyID: $0, role: "root", notBefore: nil, expires: nil)
        }
        keys += CanonicalJSON.sortedKeys(root.signingKeys.keys).compactMap { id in
            root.signingKeys[id].map {
                Key(
                    keyID: id, role: "signing", notBefore: RFC3339.string($0.notBefore),
                    expires: RFC3339.string($0.expires))
            }
        }
        keys += CanonicalJSON.sortedKeys(root.revoked).map {
            Key(keyID: $0, role: "revoked", notBefore: nil, expires: nil)
        }
        document = Document(
            file: file, appID: root.appID, version: root.version, expires: RFC3339.string(root.expires),
            minSequence: root.minSequence, threshold: root.threshold, keys: keys,
            versions: trust.roots.map { Version(version: $0.root.version, signedBy: $0.signatures.map(\.keyID)) })
    }

    public func text() -> String {
        let d = document
        let head = """
            file          \(d.file)
            app_id        \(d.appID)
            version       \(d.version)
            expires       \(d.expires)
            min_sequence  \(d.minSequence)
            threshold     \(d.threshold) of \(d.keys.filter { $0.role == "root" }.count) root keys


            """
        let keys = Table(
            columns: ["key_id", "role", "not_before", "expires"],
            rows: d.keys.map { [$0.keyID, $0.role, $0.notBefore ?? "-", $0.expires ?? "-"] })
        let versions = Table(
            columns: ["version", "signed_by"],
            rows: d.versions.map { [String($0.version), $0.signedBy.joined(separator: " ")] })
        return head + keys.text() + "\n" + versions.text()
    }
}
