import SessionKitOAuth

extension Account {
    /// The account an OpenID Connect ID token names: its `iss` and `sub` claims, and a display name from `name`,
    /// `preferred_username` or `email` (cleaned of control characters), else the subject.
    ///
    /// - Important: **The token's signature, audience, expiry and nonce are not checked.** Use this only on the ID
    ///   token that came straight from the token endpoint over TLS, in the same response as the access token
    ///   (OpenID Connect Core §3.1.3.7 lets a client skip the signature check in exactly that case), to name the
    ///   user you just authenticated. Never authorize anything with it, and never use it on a token that arrived
    ///   any other way.
    ///
    /// - Parameter idToken: A compact JWS (three base64url parts), at most 1 MiB.
    /// - Throws: `SessionError(.malformedTokenResponse)` when the token is not a readable JWT (an encrypted one
    ///   included), or lacks a non-empty `iss` or `sub` string. The message never contains the token.
    public init(idToken: String) throws {
        self = try JWT.account(from: idToken)
    }
}
