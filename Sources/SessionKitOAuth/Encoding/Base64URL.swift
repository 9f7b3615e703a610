/// The base64url encoding (RFC 4648 §5) that PKCE and JWTs use.
///
/// Encoding never pads. Decoding accepts input with or without `=` padding, and refuses the standard
/// alphabet's `+` and `/`, whitespace, a length that no encoding produces, and non-zero bits after the last
/// byte, so each byte string has exactly one accepted spelling (with or without padding).
package enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, symbol) in alphabet.enumerated() { table[Int(symbol)] = UInt8(value) }
        return table
    }()

    /// The unpadded base64url text of `bytes`.
    ///
    /// - Parameter bytes: The bytes to encode.
    /// - Returns: Text of the alphabet `A–Z a–z 0–9 - _`.
    package static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output = [UInt8]()
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        encode(bytes, appendingTo: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// Appends the unpadded base64url text of `bytes` to `output`, as ASCII.
    ///
    /// - Parameters:
    ///   - bytes: The bytes to encode.
    ///   - output: Where the text goes.
    package static func encode(_ bytes: some Collection<UInt8>, appendingTo output: inout [UInt8]) {
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(alphabet[Int(group >> 18 & 0x3F)])
            output.append(alphabet[Int(group >> 12 & 0x3F)])
            if second != nil { output.append(alphabet[Int(group >> 6 & 0x3F)]) }
            if third != nil { output.append(alphabet[Int(group & 0x3F)]) }
        }
    }

    /// The bytes that `text` encodes, or `nil` when it is not canonical base64url.
    ///
    /// - Parameter text: base64url text, padded or not.
    /// - Returns: The decoded bytes, or `nil`.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var symbols = Array(text.utf8)
        if let firstPad = symbols.firstIndex(of: UInt8(ascii: "=")) {
            // Padding is all-or-nothing: it must complete the last group exactly.
            let padding = symbols.count - firstPad
            guard symbols.count % 4 == 0, padding <= 2, symbols[firstPad...].allSatisfy({ $0 == UInt8(ascii: "=") })
            else { return nil }
            symbols.removeLast(padding)
            guard symbols.count % 4 == 4 - padding else { return nil }
        }
        guard symbols.count % 4 != 1 else { return nil }
        var output = [UInt8]()
        output.reserveCapacity(symbols.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for symbol in symbols {
            let value = decodeTable[Int(symbol)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Leftover bits must be zero, or two texts would decode to the same bytes.
        guard accumulator == 0 else { return nil }
        return output
    }
}
