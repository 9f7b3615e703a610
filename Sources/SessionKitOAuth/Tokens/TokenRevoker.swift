/// Which token a revocation names (RFC 7009 §2.1 `token_type_hint`).
public enum TokenTypeHint: String, Sendable, Hashable {
    /// A refresh token; revoking it usually revokes the access tokens issued from it too.
    case refreshToken = "refresh_token"
    /// An access token.
    case accessToken = "access_token"
}

/// Revokes a token at the authorization server (RFC 7009): what sign-out calls.
///
/// - Important: Implementations use a client of their own, never the signed-out session's, which has already
///   been invalidated when revocation runs.
public protocol TokenRevoker: Sendable {
    /// Revokes `token`. A server that does not know the token answers 200 and this returns normally.
    ///
    /// - Parameters:
    ///   - token: The token to revoke.
    ///   - hint: Which kind of token it is.
    /// - Throws: ``SessionError`` (`networkUnavailable`, `providerOutage`, `authorizationFailed`, `timedOut`);
    ///   `noRevocationEndpoint` when the server has nowhere to revoke it, which sign-out reports as
    ///   ``SignOutReport/StepOutcome/noEndpoint``.
    func revoke(_ token: String, hint: TokenTypeHint) async throws
}
