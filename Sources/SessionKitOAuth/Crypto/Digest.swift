/// A SHA-2 hash function (FIPS 180-4), as JOSE signature algorithms name them (RFC 7518 §3.1).
package enum Digest: Sendable, Hashable, CaseIterable {
    /// SHA-256, 32 bytes.
    case sha256
    /// SHA-384, 48 bytes.
    case sha384
    /// SHA-512, 64 bytes.
    case sha512

    /// The size of the digest, in bytes.
    package var byteCount: Int {
        switch self {
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }
}
