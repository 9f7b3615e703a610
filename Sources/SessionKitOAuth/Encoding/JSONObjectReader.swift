/// Reads typed members of a server's JSON object, turning each wrong type into a `SessionError` that names the
/// member but never its value (a value may be a token).
///
/// A member that is `null` reads as absent, as most OAuth servers mean it.
package struct JSONObjectReader {
    /// The object's members.
    package let members: [String: JSONValue]
    /// The error code for a member of the wrong type or shape.
    package let code: SessionError.Code
    /// What the object is, for messages ("token response").
    package let context: String
    /// The HTTP status, recorded in errors.
    package let statusCode: Int?

    /// An error about the object, in this reader's terms.
    ///
    /// - Parameter message: What is wrong, without any member value.
    /// - Returns: The error.
    package func error(_ message: String) -> SessionError {
        SessionError(code, "\(context): \(message)", statusCode: statusCode)
    }

    /// A string member, or `nil` when it is absent or `null`.
    ///
    /// - Parameter name: The member name.
    /// - Returns: The string, possibly empty.
    /// - Throws: When the member is present and not a string.
    package func string(_ name: String) throws(SessionError) -> String? {
        switch members[name] {
        case nil, .null?: return nil
        case .string(let value)?: return value
        case let other?: throw error("\"\(name)\" is \(Self.typeName(of: other)), not a string")
        }
    }

    /// A string member that must be present and non-empty.
    ///
    /// - Parameter name: The member name.
    /// - Returns: The string.
    /// - Throws: When the member is absent, `null`, empty or not a string.
    package func requiredString(_ name: String) throws(SessionError) -> String {
        guard let value = try string(name) else { throw error("\"\(name)\" is missing") }
        guard !value.isEmpty else { throw error("\"\(name)\" is empty") }
        return value
    }

    /// A whole number of seconds, or `nil` when the member is absent or `null`.
    ///
    /// Accepts a JSON number with an integral value (`3600`, `3600.0`, `3.6e3`) and, because many servers send
    /// it so, a string of ASCII digits (`"3600"`). Values above `saturation` read as `saturation`; callers decide
    /// whether that is a clamp or an error.
    ///
    /// - Parameters:
    ///   - name: The member name.
    ///   - saturation: The largest value returned.
    /// - Returns: The seconds, between 0 and `saturation`.
    /// - Throws: When the member is negative, fractional, a non-digit string, or another type.
    package func seconds(_ name: String, saturation: Int64) throws(SessionError) -> Int64? {
        switch members[name] {
        case nil, .null?:
            return nil
        case .number(let value)?:
            guard value >= 0 else { throw error("\"\(name)\" is negative") }
            guard value.rounded(.towardZero) == value else { throw error("\"\(name)\" is not a whole number") }
            // Compare as Double before converting: a huge value would trap in Int64(_:).
            return value >= Double(saturation) ? saturation : Int64(value)
        case .string(let text)?:
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                throw error("\"\(name)\" is a string that is not a whole number of seconds")
            }
            var value: Int64 = 0
            for digit in text.utf8 {
                value = value * 10 + Int64(digit - UInt8(ascii: "0"))
                if value >= saturation { return saturation }
            }
            return value
        case let other?:
            throw error("\"\(name)\" is \(Self.typeName(of: other)), not a number of seconds")
        }
    }

    /// The JSON type's name, for messages.
    ///
    /// - Parameter value: A value.
    /// - Returns: "a number", "an object", ….
    package static func typeName(of value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a Boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
