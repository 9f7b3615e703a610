/// A sign-in whose ID token was validated: who signed in, proven, and their tokens.
public struct OpenIDSignIn: Sendable {
    /// The validated claims.
    public let claims: IDTokenClaims
    /// The tokens, the ID token among them.
    public let tokens: TokenSet

    /// The account the validated claims name (`iss`, `sub`).
    public var account: Account { claims.account }
}
