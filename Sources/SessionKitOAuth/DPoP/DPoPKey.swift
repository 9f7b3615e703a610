import Foundation

/// The key a session's tokens are bound to with DPoP (RFC 9449): an ES256 (P-256) key pair made for one sign-in.
///
/// Tokens issued against a proof of this key are usable only with proofs signed by it: an access token is
/// presented with a fresh proof on every request, and a public client's refresh token is bound to the key too
/// (RFC 9449 §5). The key lives and dies with the session: it is made at sign-in, kept in the account's credential
/// record (beside the refresh token, in the same store, so restore and the other processes on the store use the same
/// key), and destroyed when sign-out deletes the record. A refresh token that a failed revocation left valid on the
/// server is then useless to anyone, with or without the network.
///
/// - Important: The private key is never printed: ``description``, `dump()` and a `Mirror` show the public key's
///   thumbprint only. It is encoded (`Codable`) only into a ``CredentialRecord`` a ``CredentialStore`` keeps.
public struct DPoPKey: Sendable, Equatable, Codable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    package let signingKey: P256SigningKey

    /// The first part of every proof this key signs, base64url of `{"alg":"ES256","jwk":…,"typ":"dpop+jwt"}`
    /// (RFC 9449 §4.2): the same for each proof, so made once.
    package let proofHeader: String

    package init(signingKey: P256SigningKey) {
        self.signingKey = signingKey
        let header: [String: JSONValue] = [
            "typ": .string("dpop+jwt"), "alg": .string("ES256"), "jwk": .object(signingKey.publicJWK),
        ]
        self.proofHeader = Base64URL.encode(JSONValue.object(header).serializedBytes)
    }

    /// Makes a new key pair from the platform's secure random source.
    ///
    /// - Returns: The key.
    /// - Throws: `SessionError(.storageFailure)` when the platform cannot make one.
    public static func generate() throws -> DPoPKey {
        do {
            return DPoPKey(signingKey: try P256SigningKey())
        } catch {
            throw SessionError(.storageFailure, "no DPoP key could be made: \(error)")
        }
    }

    /// The public key's JWK thumbprint (RFC 7638), the `jkt` a server binds the tokens to (RFC 9449 §6).
    public var thumbprint: String { signingKey.thumbprint }

    /// Two keys are equal when their public keys are.
    public static func == (lhs: DPoPKey, rhs: DPoPKey) -> Bool {
        lhs.signingKey.publicKey == rhs.signingKey.publicKey
    }

    /// Decodes the private scalar a credential record holds.
    ///
    /// - Parameter decoder: The decoder.
    /// - Throws: `DecodingError` when the value is not a base64url P-256 private key.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let bytes = Base64URL.decode(text), let key = try? P256SigningKey(storageRepresentation: bytes) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not a P-256 private key"))
        }
        self = DPoPKey(signingKey: key)
    }

    /// Encodes the private scalar, base64url: only a credential store's record is written with it.
    ///
    /// - Parameter encoder: The encoder.
    /// - Throws: What the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Base64URL.encode(signingKey.storageRepresentation))
    }

    /// The thumbprint, never the private key.
    public var description: String { "DPoPKey(jkt: \(thumbprint))" }

    /// The same as ``description``.
    public var debugDescription: String { description }

    /// The thumbprint only.
    public var customMirror: Mirror { Mirror(self, children: ["jkt": thumbprint], displayStyle: .struct) }
}
