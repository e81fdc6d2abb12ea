import Foundation

/// An `Encodable` value as a `JSONValue`, with no JSON text in between: how a
/// report's document reaches `JSONDocument`, the one layout every printed
/// document has. Keys are written in snake case (`appID` -> `app_id`,
/// `oldestResolvedAt` -> `oldest_resolved_at`), dates as RFC 3339, a
/// `JSONValue` as itself, `Data` as base64, integers as `JSONValue.integer`
/// (exact), other numbers as doubles (a non-finite one is refused, as JSON
/// cannot say it). An optional left nil is left out, and a `[String: …]`
/// keeps its keys as they are, as `JSONEncoder` does.
public enum JSONValueEncoder {
    public static func encode(_ value: some Encodable) throws -> JSONValue {
        let encoder = ValueEncoder(codingPath: [])
        return try encoder.box(value)
    }

    /// A Swift property name in snake case: a `_` where a lower-case letter
    /// or a digit meets an upper-case one, and before the last capital of a
    /// run that a lower-case letter follows (`imageTTLSeconds` ->
    /// `image_ttl_seconds`); everything lower-cased. As Foundation's
    /// `convertToSnakeCase` for every property name that starts lower-case,
    /// as Swift's do (JSONValueEncoderTests compares them).
    public static func snakeCase(_ key: String) -> String {
        let characters = Array(key)
        guard characters.contains(where: \.isUppercase) else { return key }
        var out = ""
        out.reserveCapacity(key.utf8.count + 4)
        for (i, c) in characters.enumerated() {
            if c.isUppercase, i > 0 {
                let before = characters[i - 1]
                let after = i + 1 < characters.count ? characters[i + 1] : nil
                if before.isLowercase || before.isNumber || (before.isUppercase && after?.isLowercase == true) {
                    out.append("_")
                }
            }
            out.append(contentsOf: c.lowercased())
        }
        return out
    }
}

/// Where a container puts what it is given: shared by an encoder and the
/// containers it hands out, read once the value is encoded.
private final class Slot {
    enum Content {
        case value(JSONValue)
        case object([String: Slot])
        case array([Slot])
        case empty
    }

    var content = Content.empty

    var value: JSONValue {
        switch content {
        case .value(let v): v
        case .object(let members):
            .object(Dictionary(uniqueKeysWithValues: members.map { (ExactName($0.key), $0.value.value) }))
        case .array(let items): .array(items.map(\.value))
        case .empty: .object([:])
        }
    }
}

private struct ValueEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    let slot = Slot()

    /// Every value, primitives included, is boxed here: the containers' typed
    /// `encode` requirements are met by their one generic `encode`, which
    /// comes here, so a primitive never goes round through `encode(to:)`.
    func box(_ value: some Encodable) throws -> JSONValue {
        switch value {
        case let v as JSONValue: return v
        case let b as Bool: return .bool(b)
        case let s as String: return .string(s)
        case let d as Double: return try number(d)
        case let f as Float: return try number(Double(f))
        case let n as any BinaryInteger:
            if let exact = Int64(exactly: n) { return .integer(exact) }
            return .number(Double(n))
        case let date as Date: return .string(RFC3339.string(date))
        case let data as Data: return .string(data.base64EncodedString())
        case let members as [String: any Encodable]:
            // A dictionary's keys are its data, not property names: kept as they are, as JSONEncoder keeps them.
            var object: [ExactName: JSONValue] = [:]
            for (key, member) in members {
                object[ExactName(key)] = try ValueEncoder(codingPath: codingPath).box(member)
            }
            return .object(object)
        default:
            try value.encode(to: self)
            return slot.value
        }
    }

    /// A double as JSON holds it: finite only.
    private func number(_ value: Double) throws -> JSONValue {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: codingPath, debugDescription: "not a JSON number"))
        }
        return .number(value)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = slot.content {} else { slot.content = .object([:]) }
        return KeyedEncodingContainer(Keyed<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = slot.content {} else { slot.content = .array([]) }
        return Unkeyed(encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { Single(encoder: self) }

    /// A child holding `value`, boxed at `path`.
    static func child(_ path: [any CodingKey], _ value: some Encodable) throws -> ValueEncoder {
        let child = ValueEncoder(codingPath: path)
        child.slot.content = .value(try child.box(value))
        return child
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }

        @discardableResult
        private func put(_ child: ValueEncoder, _ key: Key) -> ValueEncoder {
            if case .object(var members) = encoder.slot.content {
                members[JSONValueEncoder.snakeCase(key.stringValue)] = child.slot
                encoder.slot.content = .object(members)
            }
            return child
        }

        mutating func encodeNil(forKey key: Key) throws { try encode(JSONValue.null, forKey: key) }
        mutating func encode(_ value: some Encodable, forKey key: Key) throws {
            put(try ValueEncoder.child(codingPath + [key], value), key)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
            -> KeyedEncodingContainer<NestedKey>
        {
            put(ValueEncoder(codingPath: codingPath + [key]), key).container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            put(ValueEncoder(codingPath: codingPath + [key]), key).unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder {
            guard let key = Key(stringValue: "super") else { return encoder }
            return superEncoder(forKey: key)
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            put(ValueEncoder(codingPath: codingPath + [key]), key)
        }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }
        var count: Int {
            if case .array(let items) = encoder.slot.content { return items.count }
            return 0
        }

        @discardableResult
        private func append(_ child: ValueEncoder) -> ValueEncoder {
            if case .array(var items) = encoder.slot.content {
                items.append(child.slot)
                encoder.slot.content = .array(items)
            }
            return child
        }

        mutating func encodeNil() throws { try encode(JSONValue.null) }
        mutating func encode(_ value: some Encodable) throws { append(try ValueEncoder.child(codingPath, value)) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
            -> KeyedEncodingContainer<NestedKey>
        {
            append(ValueEncoder(codingPath: codingPath)).container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            append(ValueEncoder(codingPath: codingPath)).unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder { append(ValueEncoder(codingPath: codingPath)) }
    }

    struct Single: SingleValueEncodingContainer {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }

        mutating func encodeNil() throws { encoder.slot.content = .value(.null) }
        mutating func encode(_ value: some Encodable) throws { encoder.slot.content = .value(try encoder.box(value)) }
    }
}
