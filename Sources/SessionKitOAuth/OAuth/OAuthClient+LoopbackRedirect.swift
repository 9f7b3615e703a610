import Foundation

extension OAuthClient {
    /// Runs the authorization code grant with PKCE through the user's browser and a loopback redirect (RFC 8252
    /// §7.3): the way a command-line or desktop app signs in.
    ///
    /// It binds a loopback listener as `listener` describes (``LoopbackRedirect``), builds the request with
    /// ``authorizationRequest(redirectURI:scope:additionalParameters:)`` (a fresh PKCE pair and state, and with
    /// DPoP the sign-in's key, whose thumbprint the URL carries as `dpop_jkt`), starts waiting, calls `open` with the
    /// URL to show, and once the one callback arrived and its state matched, exchanges the code with
    /// ``exchange(code:for:)``, which proves that same key.
    ///
    /// `open` may return at once (it launched the browser) or only once the user is done: the listener already
    /// waits while it runs. When `open` throws, the wait is cancelled and the listener closed.
    ///
    /// - Parameters:
    ///   - scope: The scope to ask for, or `nil` for the server's default.
    ///   - additionalParameters: Extra query parameters (`prompt`, `login_hint`, …).
    ///   - expectedIssuer: The authorization server's issuer, to check the callback's `iss` against, or `nil`.
    ///   - listener: The listener's path, pages and connection bound.
    ///   - timeout: How long the user has, from the moment the listener waits; 5 minutes by default.
    ///   - open: Shows the URL to the user: launches the browser, or prints it.
    /// - Returns: The tokens.
    /// - Throws: ``SessionError``: `invalidInput` for an unacceptable ``LoopbackRedirect/path`` or connection bound,
    ///   `networkUnavailable` when the listener cannot listen; for the callback, what
    ///   ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)`` throws, `timedOut` when `timeout` passes
    ///   first; what ``exchange(code:for:)`` throws, or what `open` throws; `CancellationError` when the task is cancelled.
    public func authorizeInBrowser(
        scope: String? = nil,
        additionalParameters: [String: String] = [:],
        expectedIssuer: String? = nil,
        listener: LoopbackRedirect = .init(),
        timeout: Duration = .seconds(300),
        open: (URL) async throws -> Void
    ) async throws -> TokenSet {
        try await authorizeInBrowser(expectedIssuer: expectedIssuer, listener: listener, timeout: timeout, open: open) {
            try authorizationRequest(
                redirectURI: $0, scope: scope, additionalParameters: additionalParameters)
        }.tokens
    }

    /// The browser and the loopback redirect around the request `makeRequest` builds for the listener's redirect
    /// URI: the one home of that sequence, for this client's sign-in and for an ``OpenIDProvider``'s, whose request
    /// carries a nonce.
    ///
    /// - Returns: The tokens, and the request they answer.
    package func authorizeInBrowser(
        expectedIssuer: String?,
        listener: LoopbackRedirect,
        timeout: Duration,
        open: (URL) async throws -> Void,
        request makeRequest: (String) async throws -> AuthorizationRequest
    ) async throws -> (tokens: TokenSet, request: AuthorizationRequest) {
        let listener = try LoopbackRedirectListener(configuration: listener)
        let request = try await makeRequest(listener.redirectURI)
        // Leaving the scope early (open threw) cancels the wait and awaits it: the listener is closed by then.
        async let code = listener.authorizationCode(
            answering: request, expectedIssuer: expectedIssuer, timeout: timeout)
        try await open(request.url)
        return (try await exchange(code: code, for: request), request)
    }
}
