import Foundation

extension OAuthClient {
    /// Runs the authorization code grant with PKCE through the user's browser and a loopback redirect (RFC 8252
    /// §7.3): the way a command-line or desktop app signs in.
    ///
    /// It binds a ``LoopbackRedirectListener``, builds the request with
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
    /// - Throws: What ``LoopbackRedirectListener/init(configuration:)``,
    ///   ``LoopbackRedirectListener/authorizationCode(answering:expectedIssuer:timeout:)`` and
    ///   ``exchange(code:for:)`` throw, or what `open` throws; `CancellationError` when the task is cancelled.
    public func authorizeInBrowser(
        scope: String? = nil,
        additionalParameters: [String: String] = [:],
        expectedIssuer: String? = nil,
        listener: LoopbackRedirectListener.Configuration = .init(),
        timeout: Duration = .seconds(300),
        open: (URL) async throws -> Void
    ) async throws -> TokenSet {
        let listener = try LoopbackRedirectListener(configuration: listener)
        let request = try authorizationRequest(
            redirectURI: listener.redirectURI, scope: scope, additionalParameters: additionalParameters)
        // Leaving the scope early (open threw) cancels the wait and awaits it: the listener is closed by then.
        async let code = listener.authorizationCode(
            answering: request, expectedIssuer: expectedIssuer, timeout: timeout)
        try await open(request.url)
        return try await exchange(code: code, for: request)
    }
}
