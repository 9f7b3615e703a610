import Foundation

/// What a validated ID token says about who signed in (OpenID Connect Core §2).
///
/// Only SessionKit makes one, after the token's signature, issuer, audience, times and nonce were
/// checked, so holding one means those checks passed. It carries no token.
public struct IDTokenClaims: Sendable, Hashable {
    /// `iss`: the issuer, exactly as the provider's metadata names it.
    public let issuer: String
    /// `sub`: the user's stable identifier at the issuer.
    public let subject: String
    /// `aud`: the audiences, the client ID among them.
    public let audiences: [String]
    /// `azp`, when the token has one.
    public let authorizedParty: String?
    /// `exp`.
    public let expiresAt: Date
    /// `iat`.
    public let issuedAt: Date
    /// `auth_time`, when the token has one.
    public let authenticatedAt: Date?
    /// `name`, else `preferred_username`, else `email`, cleaned of control characters; `nil` when none is a
    /// non-empty string.
    public let displayName: String?
    /// `email`, when the token has one.
    public let email: String?

    /// The account these claims name: the issuer and subject, with the display name.
    public var account: Account { Account(issuer: issuer, subject: subject, displayName: displayName) }
}
