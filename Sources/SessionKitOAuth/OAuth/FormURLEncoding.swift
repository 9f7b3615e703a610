/// The `application/x-www-form-urlencoded` format that OAuth 2.0 uses for request bodies, authorization
/// request queries and redirect callbacks (RFC 6749 Appendix B).
///
/// Encoding keeps only the RFC 3986 unreserved characters (`A–Z a–z 0–9 - . _ ~`), writes a space as `+` and
/// percent-encodes every other UTF-8 byte, so `+`, `/`, `=`, `&` and `%` in a token can never change how the
/// body splits. That is stricter than the WHATWG serializer (which leaves `*` alone) and equally valid.
package enum FormURLEncoding {
    /// The encoded form of `pairs`, in order, joined with `&`.
    ///
    /// - Parameter pairs: Names and values.
    /// - Returns: `name=value&name=value`, encoded.
    package static func encode(_ pairs: [(name: String, value: String)]) -> String {
        pairs.map { encode($0.name) + "=" + encode($0.value) }.joined(separator: "&")
    }

    /// One encoded name or value.
    ///
    /// - Parameter text: The text to encode.
    /// - Returns: Its form-encoded spelling.
    package static func encode(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output = [UInt8]()
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                output.append(byte)
            case UInt8(ascii: " "):
                output.append(UInt8(ascii: "+"))
            default:
                output.append(UInt8(ascii: "%"))
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The pairs in an encoded query or body, or `nil` when a percent escape is broken or decodes to invalid
    /// UTF-8.
    ///
    /// Empty segments (`a=1&&b=2`) are skipped; a segment without `=` is a name with an empty value.
    ///
    /// - Parameter text: The encoded text, without a leading `?`.
    /// - Returns: The decoded pairs in order, or `nil`.
    package static func decode(_ text: some StringProtocol) -> [(name: String, value: String)]? {
        var pairs: [(name: String, value: String)] = []
        for segment in text.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let name: String
            let value: String
            if let equals = segment.firstIndex(of: UInt8(ascii: "=")) {
                guard let decodedName = decodeComponent(segment[..<equals]),
                    let decodedValue = decodeComponent(segment[segment.index(after: equals)...])
                else { return nil }
                name = decodedName
                value = decodedValue
            } else {
                guard let decodedName = decodeComponent(segment[...]) else { return nil }
                name = decodedName
                value = ""
            }
            pairs.append((name, value))
        }
        return pairs
    }

    private static func decodeComponent(_ bytes: some Collection<UInt8>) -> String? {
        var output = [UInt8]()
        output.reserveCapacity(bytes.count)
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"):
                output.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue)
                else { return nil }
                output.append(high << 4 | low)
            default:
                output.append(byte)
            }
        }
        return String(validating: output, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
