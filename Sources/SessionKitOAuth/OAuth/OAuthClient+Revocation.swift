import Foundation

extension OAuthClient {
    /// Revokes a token at the authorization server (RFC 7009).
    ///
    /// A confidential client authenticates as ``Configuration/clientAuthentication`` says (RFC 7009 §2.1).
    ///
    /// A 2xx means done, including for a token the server does not know (RFC 7009 §2.2). A 503 or 429
    /// (RFC 7009 §2.2.1) and a lost connection are retried per ``Configuration/revocationRetry``: at most its
    /// ``RetryPolicy/maximumAttempts`` attempts, each wait at least the server's `Retry-After`; a `Retry-After`
    /// longer than the policy's ``RetryPolicy/maximumDelay`` is not waited for. Each attempt has
    /// ``Configuration/requestTimeout`` as its wall-clock deadline.
    ///
    /// - Parameters:
    ///   - token: The token to revoke.
    ///   - hint: Which kind of token it is.
    /// - Throws: ``SessionError``: `providerOutage` (with ``SessionError/retryAfter``) when the server is still
    ///   unavailable after the attempts the policy allows or asks for a longer wait; `authorizationFailed` with
    ///   ``SessionError/oauthError`` `unsupported_token_type` when the server does not revoke this kind of
    ///   token, or another refusal; `networkUnavailable`, `timedOut`, `malformedResponse`; `noRevocationEndpoint`
    ///   when no revocation endpoint is configured (nothing is sent). `CancellationError` when the calling task is
    ///   cancelled (a bounded sign-out cancels a revocation that takes too long).
    public func revoke(_ token: String, hint: TokenTypeHint) async throws {
        guard let endpoint = configuration.revocationEndpoint else {
            throw SessionError(.noRevocationEndpoint, "the OAuth client has no revocation endpoint configured")
        }
        let revocation = try RevocationRequest(
            token: token, tokenTypeHint: hint, clientID: configuration.clientID,
            authentication: configuration.clientAuthentication)
        let request = try revocation.urlRequest(endpoint: endpoint, now: configuration.clock.wallNow)
        let policy = configuration.revocationRetry
        var attempt = 1
        while true {
            let retryAfter: Duration?
            let failure: SessionError
            do {
                let answer = try await transport.send(request, to: "the revocation endpoint")
                switch RevocationRequest.classify(
                    statusCode: answer.statusCode, body: answer.body, retryAfter: answer.retryAfter)
                {
                case .revoked:
                    return
                case .unsupportedTokenType:
                    throw SessionError(
                        .authorizationFailed,
                        "the revocation endpoint does not revoke \(hint.rawValue)s: unsupported_token_type",
                        statusCode: answer.statusCode, oauthError: "unsupported_token_type")
                case .failed(let error):
                    // A server's error_description may quote the token it was asked to revoke, or the secret.
                    throw error.redacting(revocation.secrets)
                case .retryable(let after):
                    retryAfter = after
                    failure = SessionError(
                        .providerOutage, "the revocation endpoint is unavailable (\(answer.statusCode))",
                        statusCode: answer.statusCode, retryAfter: after)
                }
            } catch let error as SessionError where error.code == .networkUnavailable {
                retryAfter = nil
                failure = error
            }
            guard attempt < policy.maximumAttempts else { throw failure }
            if let retryAfter, retryAfter > policy.maximumDelay {
                throw SessionError(
                    failure.code, failure.message + "; it asks for a wait of \(retryAfter), beyond the retry bound",
                    statusCode: failure.statusCode, retryAfter: retryAfter)
            }
            attempt += 1
            try await configuration.clock.sleep(
                for: policy.delay(beforeAttempt: attempt, retryAfter: retryAfter, random: Double.random(in: 0..<1)))
        }
    }
}
