import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// Signing in through the provider: every grant is its client's (``OAuthClient``), run on the client discovery
// built; the provider adds what OpenID Connect adds to it: `openid` in the scope, a nonce and `max_age` in the
// authorization request, and the ID token validated before the sign-in's account is known.
extension OpenIDProvider {
    /// Runs a grant of the provider's client, then validates the ID token of its answer: how any grant
    /// ``OAuthClient`` offers becomes a sign-in that proves who signed in.
    ///
    /// ```swift
    /// let signIn = try await provider.signIn { client in
    ///     try await client.exchange(code: code, for: request)
    /// }
    /// ```
    ///
    /// ``signIn(code:for:)``, ``authorizeInBrowser(scope:additionalParameters:listener:timeout:open:)`` and
    /// ``pollDeviceAuthorization(_:receivedAt:)`` are this with the client's own grants.
    ///
    /// - Parameters:
    ///   - nonce: The nonce the authorization request sent, which the ID token must carry; `nil` for a grant whose
    ///     request sends none (the device grant).
    ///   - grant: Runs the grant on the client (``client()``) and returns its tokens.
    /// - Returns: The validated sign-in.
    /// - Throws: As ``client()``, what `grant` throws, and `idTokenRejected` naming the failed check (a token
    ///   response without an ID token is refused: was `openid` in the scope?).
    public func signIn(
        nonce: String? = nil, using grant: (OAuthClient) async throws -> TokenSet
    ) async throws -> OpenIDSignIn {
        let tokens = try await grant(client())
        return try await verifiedSignIn(tokens, nonce: nonce)
    }

    /// Builds an authorization request with a fresh PKCE pair, state and nonce, asking for `openid`.
    ///
    /// When sign-ins use DPoP (``Configuration/usesDPoP``), the request is made with the sign-in's key, which
    /// ``signIn(code:for:)`` proves; when the metadata lists ES256 in `dpop_signing_alg_values_supported`, the URL
    /// binds the code to it with `dpop_jkt` (RFC 9449 §10).
    ///
    /// - Parameters:
    ///   - redirectURI: The registered redirect URI.
    ///   - scope: The scope; `openid` is added when missing.
    ///   - additionalParameters: Extra parameters (`prompt`, `login_hint`, …); not `nonce`, and not `max_age`
    ///     (set ``IDTokenValidation/maximumAuthenticationAge``, which sends it and checks `auth_time`).
    /// - Returns: The request; keep it until the callback arrives.
    /// - Throws: As ``client()``, and `invalidInput` as ``OAuthClient/authorizationRequest(redirectURI:scope:additionalParameters:)``.
    public func authorizationRequest(
        redirectURI: String, scope: String? = nil, additionalParameters: [String: String] = [:]
    ) async throws -> AuthorizationRequest {
        guard additionalParameters["max_age"] == nil else {
            throw SessionError(
                .invalidInput, "set IDTokenValidation.maximumAuthenticationAge instead of a max_age parameter")
        }
        var parameters = additionalParameters
        if let maximumAge = configuration.validation.maximumAuthenticationAge {
            parameters["max_age"] = String(Int64(maximumAge.timeInterval.rounded(.down)))
        }
        return try await client().authorizationRequest(
            redirectURI: redirectURI, scope: Self.openIDScope(scope), nonce: try Self.makeNonce(),
            additionalParameters: parameters)
    }

    /// Exchanges the code a callback answering `request` carried and validates the ID token that came with it.
    ///
    /// - Parameters:
    ///   - code: The code, from ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)``.
    ///   - request: The request, from ``authorizationRequest(redirectURI:scope:additionalParameters:)``.
    /// - Returns: The validated sign-in.
    /// - Throws: What ``OAuthClient/exchange(code:for:)`` throws, and `idTokenRejected` naming the failed check.
    public func signIn(code: String, for request: AuthorizationRequest) async throws -> OpenIDSignIn {
        guard let nonce = request.nonce else {
            throw SessionError(.invalidInput, "the authorization request sent no nonce: build it with this provider")
        }
        return try await signIn(nonce: nonce) { try await $0.exchange(code: code, for: request) }
    }

    /// Runs the authorization code grant through the user's browser and a loopback redirect (RFC 8252 §7.3), then
    /// validates the ID token: the way a command-line or desktop app signs in.
    ///
    /// - Parameters:
    ///   - scope: The scope; `openid` is added when missing.
    ///   - additionalParameters: Extra query parameters.
    ///   - listener: The loopback redirect's path, pages and connection bound.
    ///   - timeout: How long the user has; 5 minutes by default.
    ///   - open: Shows the URL to the user.
    /// - Returns: The validated sign-in.
    /// - Throws: As ``OAuthClient/authorizeInBrowser(scope:additionalParameters:expectedIssuer:listener:timeout:open:)``,
    ///   and `idTokenRejected`.
    public func authorizeInBrowser(
        scope: String? = nil,
        additionalParameters: [String: String] = [:],
        listener: LoopbackRedirect = .init(),
        timeout: Duration = .seconds(300),
        open: (URL) async throws -> Void
    ) async throws -> OpenIDSignIn {
        let issuer = try await metadata().issuer
        let (tokens, request) = try await client().authorizeInBrowser(
            expectedIssuer: issuer, listener: listener, timeout: timeout, open: open
        ) {
            try await self.authorizationRequest(
                redirectURI: $0, scope: scope, additionalParameters: additionalParameters)
        }
        return try await verifiedSignIn(tokens, nonce: request.nonce)
    }

    /// Starts a device authorization grant (RFC 8628) asking for `openid`.
    ///
    /// - Parameter scope: The scope; `openid` is added when missing.
    /// - Returns: The codes to show the user.
    /// - Throws: As ``OAuthClient/startDeviceAuthorization(scope:)`` and ``client()``.
    public func startDeviceAuthorization(scope: String? = nil) async throws -> DeviceAuthorizationResponse {
        try await client().startDeviceAuthorization(scope: Self.openIDScope(scope))
    }

    /// Polls until the user approved the device authorization, then validates the ID token (the device grant sends
    /// no nonce, so none is checked).
    ///
    /// RFC 8628 does not require the token endpoint to return an ID token for a device code, and some servers
    /// (django-oauth-toolkit among them) return none. Then the tokens are refreshed once, whose answer carries one
    /// (OpenID Connect Core §12.1), and that ID token, validated, says who signed in; the refreshed tokens are the
    /// ones returned. Without a refresh token either, the sign-in is refused: no account is made from unsigned claims.
    ///
    /// - Parameters:
    ///   - authorization: The answer of ``startDeviceAuthorization(scope:)``.
    ///   - receivedAt: When that answer arrived; `nil` means now.
    /// - Returns: The validated sign-in.
    /// - Throws: As ``OAuthClient/pollDeviceAuthorization(_:receivedAt:)``, and `idTokenRejected`.
    public func pollDeviceAuthorization(
        _ authorization: DeviceAuthorizationResponse, receivedAt: ContinuousClock.Instant? = nil
    ) async throws -> OpenIDSignIn {
        let client = try await client()
        var tokens = try await client.pollDeviceAuthorization(authorization, receivedAt: receivedAt)
        if tokens.idToken == nil, let refreshToken = tokens.refreshToken {
            // With the grant's DPoP key, if it bound the tokens: a bound refresh token is refused without a proof.
            let refreshed = try await client.requestTokens(
                .refreshToken(refreshToken, scope: nil), proofKey: tokens.proofKey)
            tokens = refreshed.refreshToken == nil ? Self.keeping(refreshToken, in: refreshed) : refreshed
        }
        return try await verifiedSignIn(tokens, nonce: nil)
    }
}
