/// The little DER (ITU-T X.690) SessionKit writes: a PKCS #1 `RSAPublicKey`, the form Security's
/// `SecKeyCreateWithData` reads an RSA public key in.
///
/// Compiled on every platform so that the Linux tests check it against an independent encoder, although only
/// the Apple backend uses it.
package enum DER {
    /// `RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }` (RFC 8017 Appendix A.1.1).
    ///
    /// - Parameters:
    ///   - modulus: n, big-endian, unsigned.
    ///   - exponent: e, big-endian, unsigned.
    /// - Returns: The DER encoding.
    package static func rsaPublicKey(modulus: [UInt8], exponent: [UInt8]) -> [UInt8] {
        sequence(integer(modulus) + integer(exponent))
    }

    /// An INTEGER holding the unsigned big-endian `magnitude`: minimal, so leading zero bytes are dropped and one
    /// is added back when the high bit is set (X.690 §8.3.2), since DER integers are two's complement.
    ///
    /// - Parameter magnitude: The value's bytes, big-endian.
    /// - Returns: Tag, length and content.
    package static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var content = Array(magnitude.drop { $0 == 0 })
        if content.first.map({ $0 & 0x80 != 0 }) ?? true { content.insert(0, at: 0) }
        return [0x02] + length(content.count) + content
    }

    /// A SEQUENCE around already-encoded `content`.
    ///
    /// - Parameter content: The encoded members, in order.
    /// - Returns: Tag, length and content.
    package static func sequence(_ content: [UInt8]) -> [UInt8] {
        [0x30] + length(content.count) + content
    }

    /// A definite length: one byte under 128, else 0x80 | the number of length bytes, then the length big-endian
    /// with no leading zero (X.690 §8.1.3, §10.1).
    ///
    /// - Parameter count: The content's length, zero or more.
    /// - Returns: The length octets.
    package static func length(_ count: Int) -> [UInt8] {
        guard count >= 0x80 else { return [UInt8(truncatingIfNeeded: count)] }
        var octets: [UInt8] = []
        var remaining = count
        while remaining > 0 {
            octets.insert(UInt8(truncatingIfNeeded: remaining), at: 0)
            remaining >>= 8
        }
        return [0x80 | UInt8(truncatingIfNeeded: octets.count)] + octets
    }
}
