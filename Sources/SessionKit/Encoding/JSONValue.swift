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
        var literal = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": literal += "\\\""
            case "\\": literal += "\\\\"
            case "\n": literal += "\\n"
            case "\r": literal += "\\r"
            case "\t": literal += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                literal += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: literal.unicodeScalars.append(scalar)
            }
        }
        return literal + "\""
    }
}

extension JSONValue {
    /// The value as compact JSON text (RFC 8259), members in name order, so equal values serialize alike: the
    /// form DPoP proofs and client assertions are signed in.
    package var serialized: String {
        switch self {
        case .null: "null"
        case .bool(let value): value ? "true" : "false"
        case .number(let value):
            // Whole numbers within 2^53 print without a fraction, as JWT times must (RFC 7519 §2, NumericDate).
            if value == value.rounded(), abs(value) < 9_007_199_254_740_992 { String(Int64(value)) } else { "\(value)" }
        case .string(let value): Self.quoted(value)
        case .array(let values): "[" + values.map(\.serialized).joined(separator: ",") + "]"
        case .object(let members):
            "{"
                + members.keys.sorted().map { Self.quoted($0) + ":" + (members[$0] ?? .null).serialized }
                .joined(separator: ",") + "}"
        }
    }
}
