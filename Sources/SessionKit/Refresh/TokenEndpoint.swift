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
    /// - Throws: ``SessionError``: `refreshRejected` for `invalid_grant`, `providerOutage` for 5xx and 429,
    ///   `networkUnavailable`, `timedOut`, `malformedTokenResponse`, `authorizationFailed`.
    func refresh(using refreshToken: String) async throws -> TokenSet
}
