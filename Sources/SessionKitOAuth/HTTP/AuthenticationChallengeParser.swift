/// Splits an HTTP authentication header value into challenges (RFC 9110 §11.6.1, §11.3).
///
/// ```
/// WWW-Authenticate = #challenge
/// challenge  = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
/// auth-param = token BWS "=" BWS ( token / quoted-string )
/// ```
///
/// The grammar is ambiguous where a comma separates two auth-params or two challenges; an element that reads as
/// `token BWS "="` followed by a value is a parameter of the current challenge, anything else starting with a
/// token starts a new challenge. The parser is tolerant, as a client reading a server's hint should be: an
/// element it cannot read is skipped up to the next comma outside a quoted string, a missing comma between two
/// parameters is forgiven, and a parameter name repeated within a challenge keeps its first value (RFC 9110 says
/// names occur once; the first is what a strict parser would have stopped at). It works on bytes, in one pass.
package struct AuthenticationChallengeParser {
    /// One challenge.
    package struct Challenge: Equatable {
        /// The scheme, as sent (compare case-insensitively).
        package var scheme: String
        /// The token68, when the challenge has one instead of parameters.
        package var token68: String?
        /// The parameters: names lowercased, values unquoted and unescaped, first occurrence of each name only.
        package var parameters: [String: String] = [:]
    }

    private let bytes: [UInt8]
    private var index = 0

    private init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The challenges in a header value, in order.
    ///
    /// - Parameter header: The field value (several `WWW-Authenticate` lines joined with commas are one value).
    /// - Returns: The challenges that could be read.
    package static func challenges(in header: String) -> [Challenge] {
        var parser = AuthenticationChallengeParser(Array(header.utf8))
        return parser.parseAll()
    }

    private mutating func parseAll() -> [Challenge] {
        var challenges: [Challenge] = []
        while true {
            skipSeparators()
            guard index < bytes.count else { return challenges }
            if !challenges.isEmpty, let (name, value) = parseParameter() {
                if challenges[challenges.count - 1].parameters[name] == nil {
                    challenges[challenges.count - 1].parameters[name] = value
                }
                continue
            }
            let scheme = readToken()
            guard !scheme.isEmpty else {
                skipElement()
                continue
            }
            var challenge = Challenge(scheme: String(decoding: scheme, as: UTF8.self))
            let afterScheme = index
            skipWhitespace()
            if index > afterScheme, index < bytes.count, bytes[index] != UInt8(ascii: ",") {
                if let (name, value) = parseParameter() {
                    challenge.parameters[name] = value
                } else if let token68 = parseToken68() {
                    challenge.token68 = token68
                } else {
                    skipElement()
                }
            } else if index < bytes.count, bytes[index] != UInt8(ascii: ",") {
                // A scheme must be followed by a space, a comma or the end.
                skipElement()
            }
            challenges.append(challenge)
        }
    }

    /// Reads `token BWS "=" BWS ( token / quoted-string )` followed by a comma or the end (after optional
    /// whitespace, or directly by another parameter), or moves nothing and returns `nil`.
    private mutating func parseParameter() -> (String, String)? {
        let start = index
        let name = readToken()
        skipWhitespace()
        guard !name.isEmpty, index < bytes.count, bytes[index] == UInt8(ascii: "=") else {
            index = start
            return nil
        }
        index += 1
        skipWhitespace()
        let value: [UInt8]
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            guard let quoted = readQuotedString() else {
                index = start
                return nil
            }
            value = quoted
        } else {
            value = Array(readToken())
            guard !value.isEmpty else {
                index = start
                return nil
            }
        }
        let end = index
        skipWhitespace()
        guard index == bytes.count || bytes[index] == UInt8(ascii: ",") || index > end else {
            index = start
            return nil
        }
        let lowercasedName = name.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }
        return (String(decoding: lowercasedName, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    /// Reads `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="` followed by a comma or the end.
    private mutating func parseToken68() -> String? {
        let start = index
        while index < bytes.count, Self.isToken68Character(bytes[index]) { index += 1 }
        guard index > start else { return nil }
        while index < bytes.count, bytes[index] == UInt8(ascii: "=") { index += 1 }
        let end = index
        skipWhitespace()
        guard index == bytes.count || bytes[index] == UInt8(ascii: ",") else {
            index = start
            return nil
        }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    private mutating func readToken() -> ArraySlice<UInt8> {
        let start = index
        while index < bytes.count, Self.isTokenCharacter(bytes[index]) { index += 1 }
        return bytes[start..<index]
    }

    /// Reads a quoted-string, unescaping quoted-pairs; `nil` when it is unterminated or has a control character.
    private mutating func readQuotedString() -> [UInt8]? {
        index += 1
        var value: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return value
            case UInt8(ascii: "\\"):
                guard index < bytes.count,
                    Self.isQuotedTextCharacter(bytes[index]) || bytes[index] == 0x22
                        || bytes[index] == 0x5C
                else { return nil }
                value.append(bytes[index])
                index += 1
            default:
                guard Self.isQuotedTextCharacter(byte) else { return nil }
                value.append(byte)
            }
        }
        return nil
    }

    /// Skips to the next comma that is not inside a quoted string, or to the end.
    private mutating func skipElement() {
        var quoted = false
        while index < bytes.count {
            let byte = bytes[index]
            if quoted {
                if byte == UInt8(ascii: "\\") {
                    index += 1
                } else if byte == UInt8(ascii: "\"") {
                    quoted = false
                }
            } else if byte == UInt8(ascii: "\"") {
                quoted = true
            } else if byte == UInt8(ascii: ",") {
                return
            }
            index += 1
        }
    }

    private mutating func skipSeparators() {
        while index < bytes.count, bytes[index] == UInt8(ascii: ",") || Self.isWhitespace(bytes[index]) {
            index += 1
        }
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, Self.isWhitespace(bytes[index]) { index += 1 }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09
    }

    /// RFC 9110 §5.6.2 `tchar`.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    private static func isToken68Character(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"):
            true
        default:
            false
        }
    }

    /// RFC 9110 §5.6.4 `qdtext` without `"` and `\`: HTAB, SP, VCHAR and obs-text.
    private static func isQuotedTextCharacter(_ byte: UInt8) -> Bool {
        (byte == 0x09 || byte == 0x20 || (0x21...0x7E).contains(byte) || byte >= 0x80) && byte != 0x22 && byte != 0x5C
    }
}
