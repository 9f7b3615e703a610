/// A public key that verifies JWS signatures: RSA, ECDSA on P-256 or P-384, or Ed25519.
///
/// Every way of making one validates the key first, so a key that exists is one SessionKit is willing to trust
/// a signature from: an RSA modulus of at least ``minimumRSAModulusBits`` bits with an odd exponent above 1, an
/// elliptic-curve point of the right size that lies on its curve, an Ed25519 key of 32 bytes. Verification then
/// never throws: a signature that does not fit the key, the algorithm or its length is simply not valid.
package struct VerificationKey: Sendable, Hashable, CustomStringConvertible {
    /// An elliptic curve for ECDSA, by its JOSE name (RFC 7518 §6.2.1.1).
    package enum Curve: String, Sendable, Hashable, CaseIterable {
        /// NIST P-256 (secp256r1), used with SHA-256 (ES256).
        case p256 = "P-256"
        /// NIST P-384 (secp384r1), used with SHA-384 (ES384).
        case p384 = "P-384"

        /// The size of a coordinate, of the private scalar, and of each half of a JOSE signature, in bytes.
        package var coordinateByteCount: Int {
            switch self {
            case .p256: 32
            case .p384: 48
            }
        }

        /// The hash JOSE pairs with the curve (RFC 7518 §3.4).
        package var digest: Digest {
            switch self {
            case .p256: .sha256
            case .p384: .sha384
            }
        }

        /// The one algorithm JOSE defines for the curve.
        package var algorithm: SignatureAlgorithm {
            switch self {
            case .p256: .es256
            case .p384: .es384
            }
        }
    }

    /// The key's public parameters, as big-endian bytes.
    package enum Material: Sendable, Hashable {
        /// An RSA key: the modulus and public exponent, without leading zero bytes.
        case rsa(modulus: [UInt8], exponent: [UInt8])
        /// An elliptic-curve point, each coordinate exactly ``Curve/coordinateByteCount`` bytes.
        case ec(curve: Curve, x: [UInt8], y: [UInt8])
        /// An Ed25519 public key, the 32-byte encoding of RFC 8032 §5.1.5.
        case ed25519(x: [UInt8])
    }

    /// The smallest RSA modulus accepted, in bits: smaller keys are factorable or close to it (NIST SP 800-57
    /// Part 1 §5.6.1, RFC 7518 §3.3 requires 2048).
    package static let minimumRSAModulusBits = 2048
    /// The largest RSA modulus accepted, in bits: bounds the work a hostile key set can cause per signature.
    package static let maximumRSAModulusBits = 16384
    /// The largest RSA public exponent accepted, in bytes: OpenSSL refuses exponents over 64 bits with moduli
    /// above 3072 bits, and keys in use have 65537.
    package static let maximumRSAExponentBytes = 8

    /// The key's parameters.
    package let material: Material

    private init(material: Material) {
        self.material = material
    }

    /// An RSA public key.
    ///
    /// - Parameters:
    ///   - modulus: n, big-endian; leading zero bytes are ignored.
    ///   - exponent: e, big-endian; leading zero bytes are ignored.
    /// - Returns: The key.
    /// - Throws: ``CryptoError/malformedKey(reason:)`` when the modulus is under ``minimumRSAModulusBits`` or
    ///   over ``maximumRSAModulusBits`` bits or even, or the exponent is even, 1, or over
    ///   ``maximumRSAExponentBytes`` bytes.
    package static func rsa(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) -> VerificationKey {
        let modulus = Array(modulus.drop { $0 == 0 })
        let exponent = Array(exponent.drop { $0 == 0 })
        let bits = bitLength(modulus)
        guard bits >= minimumRSAModulusBits else {
            throw .malformedKey(
                reason: "the RSA modulus has \(bits) bits; at least \(minimumRSAModulusBits) are required")
        }
        guard bits <= maximumRSAModulusBits else {
            throw .malformedKey(reason: "the RSA modulus has over \(maximumRSAModulusBits) bits")
        }
        // A product of two odd primes is odd.
        guard let lastModulusByte = modulus.last, lastModulusByte & 1 == 1 else {
            throw .malformedKey(reason: "the RSA modulus is even")
        }
        guard exponent.count <= maximumRSAExponentBytes else {
            throw .malformedKey(reason: "the RSA exponent is over \(maximumRSAExponentBytes) bytes")
        }
        // e = 1 makes every message its own signature; an even e is not invertible modulo an even φ(n).
        guard let lastExponentByte = exponent.last, lastExponentByte & 1 == 1, exponent != [1] else {
            throw .malformedKey(reason: "the RSA exponent must be odd and greater than 1")
        }
        return VerificationKey(material: .rsa(modulus: modulus, exponent: exponent))
    }

    /// An ECDSA public key: a point on `curve`.
    ///
    /// - Parameters:
    ///   - curve: P-256 or P-384.
    ///   - x: The x coordinate, big-endian, exactly ``Curve/coordinateByteCount`` bytes (RFC 7518 §6.2.1.2).
    ///   - y: The y coordinate, the same size.
    /// - Returns: The key.
    /// - Throws: ``CryptoError/malformedKey(reason:)`` when a coordinate has the wrong size or the point is not
    ///   on the curve.
    package static func ec(curve: Curve, x: [UInt8], y: [UInt8]) throws(CryptoError) -> VerificationKey {
        let size = curve.coordinateByteCount
        guard x.count == size, y.count == size else {
            throw .malformedKey(reason: "\(curve.rawValue) coordinates must be \(size) bytes each")
        }
        // An off-curve point can leak a private key in other protocols (invalid-curve attacks) and proves nothing
        // here; refuse it when the key is made, not at each verification.
        guard PlatformCrypto.isValidPoint(curve: curve, x: x, y: y) else {
            throw .malformedKey(reason: "the point is not on \(curve.rawValue)")
        }
        return VerificationKey(material: .ec(curve: curve, x: x, y: y))
    }

    /// An Ed25519 public key (RFC 8032).
    ///
    /// - Parameter x: The 32-byte public key.
    /// - Returns: The key.
    /// - Throws: ``CryptoError/malformedKey(reason:)`` when `x` is not 32 bytes.
    package static func ed25519(x: [UInt8]) throws(CryptoError) -> VerificationKey {
        guard x.count == 32 else { throw .malformedKey(reason: "an Ed25519 public key must be 32 bytes") }
        return VerificationKey(material: .ed25519(x: x))
    }

    /// Whether `signature` is a valid signature of `message` with this key under `algorithm`.
    ///
    /// JOSE binds each algorithm to one key type (and ES256/ES384 each to one curve), so an algorithm that does
    /// not fit the key is `false`, never a fallback to another scheme. ECDSA signatures are JOSE's raw r || s
    /// (RFC 7518 §3.4); any other length is `false`. RSA signatures must be as long as the modulus.
    ///
    /// - Parameters:
    ///   - signature: The signature bytes, as decoded from a JWS.
    ///   - message: The signed bytes (for a JWS, the ASCII of `header.payload`); any length, empty included.
    ///   - algorithm: The algorithm the signer claims.
    /// - Returns: Whether the signature is valid.
    package func isValidSignature(_ signature: [UInt8], for message: [UInt8], algorithm: SignatureAlgorithm) -> Bool {
        switch (material, algorithm.scheme) {
        case (.rsa(let modulus, let exponent), .rsaPKCS1v15), (.rsa(let modulus, let exponent), .rsaPSS):
            guard signature.count == modulus.count, let digest = algorithm.digest else { return false }
            return PlatformCrypto.verifyRSA(
                modulus: modulus, exponent: exponent, digest: digest, pss: algorithm.scheme == .rsaPSS,
                message: message, signature: signature)
        case (.ec(let curve, let x, let y), .ecdsa):
            guard algorithm == curve.algorithm, signature.count == 2 * curve.coordinateByteCount else { return false }
            return PlatformCrypto.verifyECDSA(curve: curve, x: x, y: y, message: message, signature: signature)
        case (.ed25519(let x), .edDSA):
            guard signature.count == 64 else { return false }
            return PlatformCrypto.verifyEd25519(publicKey: x, message: message, signature: signature)
        case (.rsa, _), (.ec, _), (.ed25519, _):
            return false
        }
    }

    /// The key type and size; a public key is not secret, but its bytes are not useful in a log either.
    package var description: String {
        switch material {
        case .rsa(let modulus, _): "VerificationKey(RSA, \(Self.bitLength(modulus)) bits)"
        case .ec(let curve, _, _): "VerificationKey(EC, \(curve.rawValue))"
        case .ed25519: "VerificationKey(OKP, Ed25519)"
        }
    }

    /// The number of significant bits of a big-endian magnitude without leading zero bytes.
    private static func bitLength(_ magnitude: [UInt8]) -> Int {
        guard let first = magnitude.first else { return 0 }
        return (magnitude.count - 1) * 8 + (8 - first.leadingZeroBitCount)
    }
}
