import Foundation

/// A strict RFC 8259 JSON parser over UTF-8 bytes, linear in its input.
///
/// It refuses what a permissive parser would guess at: duplicate member names (RFC 7519 §4 allows refusing
/// them, and two `access_token` members are an attack, not a typo), lone surrogates, invalid UTF-8, raw
/// control characters in strings, numbers outside `Double`'s range, nesting deeper than
/// `OAuthLimits/maximumJSONDepth` and trailing content. Error reasons name a byte offset, never input text,
/// so no token can reach a message through them.
package struct JSONParser {
    /// Why the input is not acceptable JSON.
    package struct Failure: Error, Equatable {
        /// What is wrong, without input text.
        package let reason: String
        /// The byte offset where parsing stopped.
        package let offset: Int
    }

    private let bytes: [UInt8]
    private var index = 0
    private let maximumDepth: Int

    private init(bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    /// Parses one JSON text.
    ///
    /// - Parameters:
    ///   - bytes: UTF-8 JSON; a leading byte order mark is skipped (RFC 8259 §8.1).
    ///   - maximumDepth: How deeply arrays and objects may nest.
    /// - Returns: The value.
    /// - Throws: ``Failure`` when the text is not acceptable JSON.
    package static func parse(
        _ bytes: [UInt8], maximumDepth: Int = OAuthLimits.maximumJSONDepth
    ) throws(Failure) -> JSONValue {
        var parser = JSONParser(bytes: bytes, maximumDepth: maximumDepth)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3 }
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.failure("unexpected content after the JSON value") }
        return value
    }

    /// Parses a response body that must be one JSON object, turning every failure into a `SessionError`.
    ///
    /// - Parameters:
    ///   - data: The body.
    ///   - code: The error code for a body that is not a JSON object.
    ///   - context: What the body is, for messages ("token response").
    ///   - statusCode: The HTTP status, recorded in the error.
    /// - Returns: The object's members.
    /// - Throws: `SessionError(code)` when the body is too large, not JSON, or not an object.
    package static func object(
        from data: Data,
        code: SessionError.Code,
        context: String,
        statusCode: Int?
    ) throws(SessionError) -> [String: JSONValue] {
        guard data.count <= OAuthLimits.maximumBodyBytes else {
            throw SessionError(
                code, "\(context) is \(data.count) bytes, over the \(OAuthLimits.maximumBodyBytes)-byte limit",
                statusCode: statusCode)
        }
        let value: JSONValue
        do {
            value = try parse([UInt8](data))
        } catch {
            throw SessionError(
                code, "\(context) is not valid JSON: \(error.reason) at byte \(error.offset)", statusCode: statusCode)
        }
        guard case .object(let members) = value else {
            throw SessionError(code, "\(context) is JSON but not an object", statusCode: statusCode)
        }
        return members
    }

    private func failure(_ reason: String) -> Failure {
        Failure(reason: reason, offset: index)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(Failure) -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw failure("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw failure("expected a value")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(Failure) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw failure("unexpected end of input") }
        let matches = literal.withUTF8Buffer { expected in
            bytes[index..<(index + count)].elementsEqual(expected)
        }
        guard matches else { throw failure("invalid literal") }
        index += count
    }

    private mutating func parseObject(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= maximumDepth else { throw failure("nesting deeper than \(maximumDepth)") }
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw failure("expected a member name")
            }
            let nameOffset = index
            let name = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            let value = try parseValue(depth: depth)
            guard members.updateValue(value, forKey: name) == nil else {
                throw Failure(reason: "duplicate member name", offset: nameOffset)
            }
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default: throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= maximumDepth else { throw failure("nesting deeper than \(maximumDepth)") }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: throw failure("expected ',' or ']'")
            }
        }
    }

    private mutating func parseString() throws(Failure) -> String {
        index += 1
        var buffer = [UInt8]()
        while true {
            guard index < bytes.count else { throw failure("unterminated string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = String(validating: buffer, as: UTF8.self) else {
                    throw failure("string is not valid UTF-8")
                }
                return string
            case UInt8(ascii: "\\"):
                index += 1
                try parseEscape(into: &buffer)
            case 0x00..<0x20:
                throw failure("raw control character in string")
            default:
                buffer.append(byte)
                index += 1
            }
        }
    }

    private mutating func parseEscape(into buffer: inout [UInt8]) throws(Failure) {
        guard index < bytes.count else { throw failure("unterminated escape") }
        let escape = bytes[index]
        index += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): buffer.append(escape)
        case UInt8(ascii: "b"): buffer.append(0x08)
        case UInt8(ascii: "f"): buffer.append(0x0C)
        case UInt8(ascii: "n"): buffer.append(0x0A)
        case UInt8(ascii: "r"): buffer.append(0x0D)
        case UInt8(ascii: "t"): buffer.append(0x09)
        case UInt8(ascii: "u"):
            var scalarValue = try parseHex4()
            if (0xD800..<0xDC00).contains(scalarValue) {
                // A high surrogate must be followed by an escaped low surrogate (RFC 8259 §7).
                guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"),
                    bytes[index + 1] == UInt8(ascii: "u")
                else { throw failure("unpaired surrogate") }
                index += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw failure("unpaired surrogate") }
                scalarValue = 0x10000 + ((scalarValue - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalarValue) {
                throw failure("unpaired surrogate")
            }
            guard let scalar = Unicode.Scalar(scalarValue) else { throw failure("invalid escape") }
            buffer.append(contentsOf: Array(String(Character(scalar)).utf8))
        default:
            throw failure("invalid escape")
        }
    }

    private mutating func parseHex4() throws(Failure) -> UInt32 {
        guard bytes.count - index >= 4 else { throw failure("unterminated escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw failure("invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(Failure) -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
        // RFC 8259 §6: no leading zeros.
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
            skipDigits()
        }
        guard index - start <= OAuthLimits.maximumNumberLength else {
            throw Failure(reason: "number longer than \(OAuthLimits.maximumNumberLength) characters", offset: start)
        }
        let lexeme = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(lexeme), value.isFinite else {
            throw Failure(reason: "number out of range", offset: start)
        }
        return value
    }

    private mutating func skipDigits() {
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
