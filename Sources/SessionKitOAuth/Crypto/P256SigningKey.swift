/// A P-256 private key that signs with ES256 (RFC 7518 §3.4), such as the key a DPoP client proves possession of
/// (RFC 9449).
///
/// The key is kept twice: as its private scalar, for ``storageRepresentation``, and as the platform's key object,
/// made once at init so that a signature (a DPoP proof per request) does not pay for importing the key each time.
/// The platform's object is freed, and OpenSSL clears its copy of the scalar, when the last copy of the key goes.
///
/// - Important: ``storageRepresentation`` is the private key. Give it to a credential store and nothing else;
///   never print, log or send it. ``description`` and `dump` show only the public key's thumbprint. Copies
///   Swift makes of the scalar cannot be wiped (see `SecureWipe`).
package struct P256SigningKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The private scalar d, 32 bytes big-endian, in [1, n - 1].
    private let scalar: [UInt8]

    /// The public key, an ES256 verification key.
    package let publicKey: VerificationKey

    /// The platform's key object, shared by copies of this value.
    private let platformKey: PlatformCrypto.P256KeyObject

    /// A new key from the platform's secure generator.
    ///
    /// - Throws: ``CryptoError/platformFailure(reason:)`` when the platform cannot generate a key.
    package init() throws(CryptoError) {
        guard let pair = PlatformCrypto.generateP256() else {
            throw .platformFailure(reason: "P-256 key generation failed")
        }
        self = try P256SigningKey(scalar: pair.scalar, x: pair.x, y: pair.y)
    }

    /// The key whose ``storageRepresentation`` is `storageRepresentation`, as a credential store gives it back.
    ///
    /// - Parameter storageRepresentation: The 32-byte private scalar, big-endian.
    /// - Throws: ``CryptoError/malformedKey(reason:)`` when it is not 32 bytes, or is zero or not below the
    ///   order of the P-256 group.
    package init(storageRepresentation: [UInt8]) throws(CryptoError) {
        guard storageRepresentation.count == 32 else {
            throw .malformedKey(reason: "a P-256 private key must be 32 bytes")
        }
        guard Self.isInRange(storageRepresentation),
            let point = PlatformCrypto.p256PublicKey(scalar: storageRepresentation)
        else {
            throw .malformedKey(reason: "the P-256 private scalar is zero or not below the group order")
        }
        self = try P256SigningKey(scalar: storageRepresentation, x: point.x, y: point.y)
    }

    private init(scalar: [UInt8], x: [UInt8], y: [UInt8]) throws(CryptoError) {
        self.scalar = scalar
        // Also proves the platform handed back a point on the curve.
        self.publicKey = try VerificationKey.ec(curve: .p256, x: x, y: y)
        guard let platformKey = PlatformCrypto.P256KeyObject(scalar: scalar, x: x, y: y) else {
            throw .platformFailure(reason: "the platform refused the P-256 key")
        }
        self.platformKey = platformKey
    }

    /// The private scalar, 32 bytes big-endian: what a credential store keeps to restore the key with
    /// ``init(storageRepresentation:)``.
    ///
    /// - Important: This is the private key. Never print, log or send it.
    package var storageRepresentation: [UInt8] { scalar }

    /// The public key as a JWK: `{"kty": "EC", "crv": "P-256", "x": …, "y": …}`, the `jwk` header of a DPoP proof
    /// (RFC 9449 §4.2).
    package var publicJWK: [String: JSONValue] { publicKey.jwk }

    /// The public key's JWK thumbprint (RFC 7638), base64url: DPoP's `jkt` (RFC 9449 §6.1).
    package var thumbprint: String { publicKey.thumbprint }

    /// The ES256 signature of `message`: ECDSA on P-256 with SHA-256, as JOSE's 64-byte r || s.
    ///
    /// - Parameter message: The bytes to sign (for a JWS, the ASCII of `header.payload`).
    /// - Returns: 64 bytes.
    /// - Throws: ``CryptoError/platformFailure(reason:)`` when the platform cannot sign.
    package func sign(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let signature = platformKey.sign(message), signature.count == 64
        else { throw .platformFailure(reason: "ES256 signing failed") }
        return signature
    }

    /// 16 fresh random bytes for a one-time identifier such as a DPoP proof's `jti` (RFC 9449 §4.2 asks for at
    /// least 96 random bits); on Linux prepared ahead with the signature nonces, each handed out once.
    ///
    /// - Returns: 16 bytes.
    /// - Throws: ``CryptoError/platformFailure(reason:)`` when the platform has no randomness.
    package func identifier() throws(CryptoError) -> [UInt8] {
        guard let bytes = platformKey.identifier(), bytes.count == 16 else {
            throw .platformFailure(reason: "no random identifier could be made")
        }
        return bytes
    }

    #if !canImport(CryptoKit)
        /// How many signature nonces are prepared (Linux; see `PlatformCrypto.P256KeyObject`), for tests.
        package var preparedNonces: Int { platformKey.preparedCount }

        /// Fills the nonce pool on the caller's thread, for tests.
        package func prepareNonces() { platformKey.prepare() }

        /// How many nonces a full pool holds.
        package static var noncePoolSize: Int { PlatformCrypto.P256KeyObject.poolTarget }
    #endif

    /// n, the order of the P-256 group (SEC 2 §2.4.2), big-endian.
    private static let groupOrder: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    /// Whether the 32-byte `scalar` is in [1, n - 1], checked here rather than trusted to each backend.
    ///
    /// Every byte is read whatever the values (a subtraction's final borrow), so the time taken says nothing
    /// about the private key.
    private static func isInRange(_ scalar: [UInt8]) -> Bool {
        guard scalar.count == groupOrder.count else { return false }
        var borrow = 0
        var bits: UInt8 = 0
        for index in stride(from: scalar.count - 1, through: 0, by: -1) {
            let difference = Int(scalar[index]) - Int(groupOrder[index]) - borrow
            borrow = (difference >> 8) & 1
            bits |= scalar[index]
        }
        // A borrow out of scalar - n means scalar < n.
        return borrow == 1 && bits != 0
    }

    /// The public key's thumbprint; never the private key.
    package var description: String { "P256SigningKey(thumbprint: \(thumbprint), private key: <redacted>)" }

    /// The same as ``description``.
    package var debugDescription: String { description }

    /// No children, so `dump` and debuggers that walk the mirror do not reach the scalar.
    package var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
