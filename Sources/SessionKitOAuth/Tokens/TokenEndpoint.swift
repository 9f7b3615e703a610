/// Exchanges a refresh token for new tokens (RFC 6749 §6): what a session calls when its access token
/// expires or is rejected.
///
/// ``OAuthClient`` is the implementation SessionKit ships; tests and apps with their own token service can
/// provide another. The session, not the endpoint, owns single flight, rotation, the loop guard and the
/// identity check at commit, so an implementation only sends one request and reads one answer.
public protocol TokenEndpoint: Sendable {
    /// Sends a `refresh_token` grant and returns the new tokens.
    ///
    /// - Parameter refreshToken: The refresh token to present.
    /// - Returns: The new token set, its expiry measured from the moment the response arrived.
    /// - Throws: ``SessionError``: `refreshRejected` for `invalid_grant` (and, from ``OAuthClient``, a 400 without
    ///   an OAuth error), `providerOutage` for 5xx and 429, `networkUnavailable`, `timedOut`,
    ///   `malformedTokenResponse`, `authorizationFailed`.
    func refresh(using refreshToken: String) async throws -> TokenSet

    /// Sends a `refresh_token` grant for `account`, with a DPoP proof of `proofKey` when its tokens are bound to
    /// one, and returns the new tokens.
    ///
    /// What a session calls. An endpoint that validates what the answer says about the user (``OpenIDProvider``
    /// checks that a refreshed ID token names the same issuer and subject, OpenID Connect Core §12.2) needs to know
    /// whose token it refreshes; one that binds tokens (RFC 9449 §5) needs the key. The default calls
    /// ``refresh(using:)``, which sends no proof: a server refuses a bound refresh token that way, so an endpoint
    /// for DPoP-bound tokens implements this.
    ///
    /// - Parameters:
    ///   - refreshToken: The refresh token to present.
    ///   - account: The account the token belongs to.
    ///   - proofKey: The DPoP key the tokens are bound to, if any.
    /// - Returns: The new token set.
    /// - Throws: As ``refresh(using:)``, and `idTokenRejected` for an answer about someone else; that ends the
    ///   account's session as a rejected grant does.
    func refresh(using refreshToken: String, for account: Account, proofKey: DPoPKey?) async throws -> TokenSet
}

extension TokenEndpoint {
    /// Calls ``refresh(using:)``: an endpoint that reads nothing about the user and binds nothing need not know
    /// whose token it is.
    public func refresh(using refreshToken: String, for account: Account, proofKey: DPoPKey?) async throws
        -> TokenSet
    {
        try await refresh(using: refreshToken)
    }
}
