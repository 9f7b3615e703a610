/// Byte-level pieces of the HTTP field grammar (RFC 9110 §5.6) shared by the header parsers.
///
/// Every function works on bounds-checked `[UInt8]` slices so malformed or hostile input can at worst be
/// rejected, never read out of bounds; every loop advances by at least one byte, so parsing is linear.
package enum HTTPFieldSyntax {
    /// The largest delta-seconds value a cache must represent; larger values are clamped to it (RFC 9111 §1.2.2).
    package static let maximumDeltaSeconds = 2_147_483_648

    /// Whether `byte` is a `tchar` (RFC 9110 §5.6.2), the characters a token is made of.
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// Whether `byte` is optional whitespace (space or horizontal tab).
    package static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
    }

    /// Whether `byte` is an ASCII digit.
    package static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// `bytes` without leading and trailing optional whitespace.
    package static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, isWhitespace(bytes[start]) { start += 1 }
        while end > start, isWhitespace(bytes[end - 1]) { end -= 1 }
        return bytes[start..<end]
    }

    /// Parses `delta-seconds` (`1*DIGIT`), clamping values above ``maximumDeltaSeconds``; nil for anything else.
    package static func deltaSeconds(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard !bytes.isEmpty else { return nil }
        var value = 0
        for byte in bytes {
            guard isDigit(byte) else { return nil }
            // Once clamped, later digits can only make the number larger: keep scanning only to validate.
            if value < maximumDeltaSeconds {
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
        }
        return min(value, maximumDeltaSeconds)
    }

    /// ASCII lower-casing of a token (field names and directive names compare case-insensitively).
    package static func lowercasedString(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.lazy.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// The elements of a comma-separated list of tokens (`#token`), lower-cased.
    ///
    /// Empty elements are skipped, as RFC 9110 §5.6.1 requires of recipients.
    /// - Returns: The tokens, and whether any non-empty element was not a token.
    package static func tokenList(_ bytes: ArraySlice<UInt8>) -> (tokens: [String], malformed: Bool) {
        var tokens: [String] = []
        var malformed = false
        for element in bytes.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            let token = trimmed(element)
            if token.isEmpty { continue }
            if token.allSatisfy(isTokenByte) {
                tokens.append(lowercasedString(token))
            } else {
                malformed = true
            }
        }
        return (tokens, malformed)
    }
}
