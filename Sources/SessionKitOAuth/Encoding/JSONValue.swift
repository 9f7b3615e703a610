/// A JSON value as SessionKit's strict parser reads it: no `Any`, no bridging, every case explicit.
///
/// SessionKit reads JSON from authorization servers (token responses, errors, ID token claims) with its own
/// parser rather than `JSONSerialization`, so that a `true` is never read as the number 1, a duplicated member
/// is refused rather than silently resolved, nesting is bounded, and the behaviour is the same on every platform.
/// Numbers are `Double`: integers are exact up to 2^53, which covers every time claim.
package enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A finite number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; member names are unique.
    case object([String: JSONValue])

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number, when this is a number.
    public var numberValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The Boolean, when this is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The member named `key`, when this is an object that has one.
    ///
    /// - Parameter key: A member name.
    /// - Returns: The member's value, or `nil`.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }
}

extension JSONValue {
    /// `text` as a JSON string literal, quotes included (RFC 8259 §7): what the tool reports, the benchmarks and
    /// the mock authorization server write, read back by any JSON parser as `text`.
    ///
    /// - Parameter text: Any string.
    /// - Returns: The literal.
    package static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 2)
        appendQuoted(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `text` as a JSON string literal. Only `"`, `\` and the controls below U+0020 are escaped; every
    /// other byte of the (valid) UTF-8 is copied as it is, so each scalar is written whole.
    package static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), byte]
            case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    /// The value as compact JSON text (RFC 8259), members in name order, so equal values serialize alike: the
    /// form DPoP proofs and client assertions are signed in.
    package var serialized: String { String(decoding: serializedBytes, as: UTF8.self) }

    /// The same text as UTF-8, written into one buffer: a DPoP proof serializes its claims on every request.
    package var serializedBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        serialize(into: &bytes)
        return bytes
    }

    private func serialize(into bytes: inout [UInt8]) {
        switch self {
        case .null: bytes += "null".utf8
        case .bool(let value): bytes += (value ? "true" : "false").utf8
        case .number(let value):
            // Whole numbers within 2^53 print without a fraction, as JWT times must (RFC 7519 §2, NumericDate).
            if value == value.rounded(), abs(value) < 9_007_199_254_740_992 {
                bytes += String(Int64(value)).utf8
            } else {
                bytes += "\(value)".utf8
            }
        case .string(let value): Self.appendQuoted(value, to: &bytes)
        case .array(let values):
            bytes.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                value.serialize(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            // Name order is the order of the names' UTF-8 bytes, which is Unicode scalar order.
            let names = members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            bytes.append(UInt8(ascii: "{"))
            for (index, name) in names.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.appendQuoted(name, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                (members[name] ?? .null).serialize(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}
