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
        case .object(let members): .object(members.mapValues(\.value))
        case .array(let items): .array(items.map(\.value))
        case .empty: .object([:])
        }
    }
}

private struct ValueEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var slot = Slot()

    init(codingPath: [any CodingKey], slot: Slot = Slot()) {
        self.codingPath = codingPath
        self.slot = slot
    }

    func box(_ value: some Encodable) throws -> JSONValue {
        switch value {
        case let v as JSONValue: return v
        case let date as Date: return .string(RFC3339.string(date))
        case let data as Data: return .string(data.base64EncodedString())
        case let members as [String: any Encodable]:
            // A dictionary's keys are its data, not property names: kept as they are, as JSONEncoder keeps them.
            var object: [String: JSONValue] = [:]
            for (key, member) in members {
                object[key] = try ValueEncoder(codingPath: codingPath).box(member)
            }
            return .object(object)
        default:
            try value.encode(to: self)
            return slot.value
        }
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

    /// A number as JSON holds it exactly: an integer as one, a double when finite.
    static func number(_ value: Double, _ path: [any CodingKey]) throws -> JSONValue {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: path, debugDescription: "not a JSON number"))
        }
        return .number(value)
    }

    static func integer(_ value: some BinaryInteger) -> JSONValue {
        if let exact = Int64(exactly: value) { return .integer(exact) }
        return .number(Double(value))
    }

    func encoded(_ value: some Encodable, at key: (any CodingKey)?) throws -> Slot {
        let path = key.map { codingPath + [$0] } ?? codingPath
        let child = ValueEncoder(codingPath: path)
        child.slot.content = .value(try child.box(value))
        return child.slot
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }

        private func put(_ slot: Slot, _ key: Key) {
            guard case .object(var members) = encoder.slot.content else { return }
            members[JSONValueEncoder.snakeCase(key.stringValue)] = slot
            encoder.slot.content = .object(members)
        }

        private func put(_ value: JSONValue, _ key: Key) {
            let slot = Slot()
            slot.content = .value(value)
            put(slot, key)
        }

        mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
        mutating func encode(_ value: String, forKey key: Key) throws { put(.string(value), key) }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            put(try ValueEncoder.number(value, codingPath + [key]), key)
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            put(try ValueEncoder.number(Double(value), codingPath + [key]), key)
        }
        mutating func encode(_ value: Int, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { put(ValueEncoder.integer(value), key) }
        mutating func encode(_ value: some Encodable, forKey key: Key) throws {
            put(try encoder.encoded(value, at: key), key)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
            -> KeyedEncodingContainer<NestedKey>
        {
            let child = ValueEncoder(codingPath: codingPath + [key])
            put(child.slot, key)
            return child.container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let child = ValueEncoder(codingPath: codingPath + [key])
            put(child.slot, key)
            return child.unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder {
            guard let key = Key(stringValue: "super") else { return encoder }
            return superEncoder(forKey: key)
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            let child = ValueEncoder(codingPath: codingPath + [key])
            put(child.slot, key)
            return child
        }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }
        var count: Int {
            if case .array(let items) = encoder.slot.content { return items.count }
            return 0
        }

        private func append(_ slot: Slot) {
            guard case .array(var items) = encoder.slot.content else { return }
            items.append(slot)
            encoder.slot.content = .array(items)
        }

        private func append(_ value: JSONValue) {
            let slot = Slot()
            slot.content = .value(value)
            append(slot)
        }

        mutating func encodeNil() throws { append(.null) }
        mutating func encode(_ value: Bool) throws { append(.bool(value)) }
        mutating func encode(_ value: String) throws { append(.string(value)) }
        mutating func encode(_ value: Double) throws { append(try ValueEncoder.number(value, codingPath)) }
        mutating func encode(_ value: Float) throws { append(try ValueEncoder.number(Double(value), codingPath)) }
        mutating func encode(_ value: Int) throws { append(ValueEncoder.integer(value)) }
        mutating func encode(_ value: Int64) throws { append(ValueEncoder.integer(value)) }
        mutating func encode(_ value: UInt64) throws { append(ValueEncoder.integer(value)) }
        mutating func encode(_ value: some Encodable) throws { append(try encoder.encoded(value, at: nil)) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
            -> KeyedEncodingContainer<NestedKey>
        {
            let child = ValueEncoder(codingPath: codingPath)
            append(child.slot)
            return child.container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let child = ValueEncoder(codingPath: codingPath)
            append(child.slot)
            return child.unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder {
            let child = ValueEncoder(codingPath: codingPath)
            append(child.slot)
            return child
        }
    }

    struct Single: SingleValueEncodingContainer {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }

        private func set(_ value: JSONValue) { encoder.slot.content = .value(value) }

        mutating func encodeNil() throws { set(.null) }
        mutating func encode(_ value: Bool) throws { set(.bool(value)) }
        mutating func encode(_ value: String) throws { set(.string(value)) }
        mutating func encode(_ value: Double) throws { set(try ValueEncoder.number(value, codingPath)) }
        mutating func encode(_ value: Float) throws { set(try ValueEncoder.number(Double(value), codingPath)) }
        mutating func encode(_ value: Int) throws { set(ValueEncoder.integer(value)) }
        mutating func encode(_ value: Int64) throws { set(ValueEncoder.integer(value)) }
        mutating func encode(_ value: UInt64) throws { set(ValueEncoder.integer(value)) }
        mutating func encode(_ value: some Encodable) throws { set(try encoder.box(value)) }
    }
}
