/// SessionKit's cryptography, taken from the platform: OpenSSL 3's libcrypto on Linux, CryptoKit and Security on
/// Apple platforms. Nothing here is implemented by hand.
///
/// The backends (`PlatformCrypto+OpenSSL.swift`, `PlatformCrypto+CryptoKit.swift`) offer the same internal
/// primitives; ``VerificationKey`` and ``P256SigningKey`` check every length and range before calling them, so the
/// backends only ever see well-formed input.
package enum PlatformCrypto {
    /// The digest of `message` under `digest`.
    ///
    /// - Important: Traps if the platform cannot hash, which only a broken installation causes; no input does.
    /// - Parameters:
    ///   - digest: The hash function.
    ///   - message: The bytes to hash; any length, empty included.
    /// - Returns: ``Digest/byteCount`` bytes.
    package static func digest(_ digest: Digest, of message: [UInt8]) -> [UInt8] {
        guard let output = platformDigest(digest, of: message), output.count == digest.byteCount else {
            // A hash cannot fail on any input; continuing without one would mean sending an unhashed secret.
            preconditionFailure("the platform's \(digest) implementation failed")
        }
        return output
    }

    /// The SHA-256 digest of `message` (FIPS 180-4), 32 bytes.
    ///
    /// - Parameter message: The bytes to hash.
    /// - Returns: The digest.
    package static func sha256(_ message: [UInt8]) -> [UInt8] {
        digest(.sha256, of: message)
    }

    /// `count` bytes from the platform's cryptographically secure generator (OpenSSL's `RAND_bytes`, or
    /// `SecRandomCopyBytes`).
    ///
    /// - Parameter count: How many bytes; zero gives an empty array.
    /// - Returns: The bytes.
    /// - Throws: ``CryptoError/platformFailure(reason:)`` when the generator fails, or `count` is negative or over
    ///   `Int32.max` (what `RAND_bytes` takes in one call).
    package static func randomBytes(count: Int) throws(CryptoError) -> [UInt8] {
        guard (0...Int(Int32.max)).contains(count) else {
            throw .platformFailure(reason: "\(count) random bytes were requested; 0 to \(Int32.max) can be")
        }
        guard let bytes = platformRandomBytes(count: count), bytes.count == count else {
            throw .platformFailure(reason: "the system's secure random generator failed")
        }
        return bytes
    }

    /// `count` secure random bytes, for callers that cannot go on without them (a PKCE verifier, an OAuth
    /// `state`).
    ///
    /// - Important: Traps when the platform's generator fails, as `SystemRandomNumberGenerator` does: a
    ///   predictable verifier or state would silently remove the protection it exists for.
    /// - Parameter count: How many bytes, zero or more.
    /// - Returns: The bytes.
    package static func requiredRandomBytes(count: Int) -> [UInt8] {
        do {
            return try randomBytes(count: count)
        } catch {
            preconditionFailure("\(error)")
        }
    }
}
