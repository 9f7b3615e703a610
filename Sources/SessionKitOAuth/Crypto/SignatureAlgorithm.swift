/// A JWS signature algorithm SessionKit verifies, by its JOSE name (RFC 7518 §3.1, RFC 8037 §3.1).
///
/// `none` and the HMAC algorithms are deliberately absent: an ID token or DPoP proof is verified with a public
/// key only.
public enum SignatureAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3).
    case rs256 = "RS256"
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    case rs384 = "RS384"
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    case rs512 = "RS512"
    /// RSASSA-PSS with SHA-256, MGF1 with SHA-256 and a 32-byte salt (RFC 7518 §3.5).
    case ps256 = "PS256"
    /// RSASSA-PSS with SHA-384, MGF1 with SHA-384 and a 48-byte salt.
    case ps384 = "PS384"
    /// RSASSA-PSS with SHA-512, MGF1 with SHA-512 and a 64-byte salt.
    case ps512 = "PS512"
    /// ECDSA on P-256 with SHA-256 (RFC 7518 §3.4).
    case es256 = "ES256"
    /// ECDSA on P-384 with SHA-384.
    case es384 = "ES384"
    /// EdDSA; SessionKit supports the Ed25519 curve only (RFC 8037 §3.1).
    case edDSA = "EdDSA"

    /// A family of signature schemes, each tied to one key type.
    package enum Scheme: Sendable, Hashable {
        /// RSASSA-PKCS1-v1_5 (RFC 8017 §8.2), with an RSA key.
        case rsaPKCS1v15
        /// RSASSA-PSS (RFC 8017 §8.1), with an RSA key.
        case rsaPSS
        /// ECDSA (FIPS 186-4), with a P-256 or P-384 key.
        case ecdsa
        /// EdDSA (RFC 8032), with an Ed25519 key.
        case edDSA
    }

    /// The scheme, which decides the key type the algorithm needs.
    package var scheme: Scheme {
        switch self {
        case .rs256, .rs384, .rs512: .rsaPKCS1v15
        case .ps256, .ps384, .ps512: .rsaPSS
        case .es256, .es384: .ecdsa
        case .edDSA: .edDSA
        }
    }

    /// The hash the algorithm signs with; `nil` for EdDSA, which hashes inside the signature scheme.
    package var digest: Digest? {
        switch self {
        case .rs256, .ps256, .es256: .sha256
        case .rs384, .ps384, .es384: .sha384
        case .rs512, .ps512: .sha512
        case .edDSA: nil
        }
    }
}
