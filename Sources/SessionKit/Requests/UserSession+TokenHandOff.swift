import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Runs `body` with this session's access token, valid for at least `minimumValidity` from now, for code that
    /// sends its own requests (an image loader, a video player, another SDK).
    ///
    /// When the token in hand expires sooner, it is refreshed first: one refresh shared with every other caller
    /// and request of the session (single flight), counted by ``RefreshPolicy``'s loop guard. `body` runs in a task
    /// of its own, which ``end()`` cancels.
    ///
    /// ```swift
    /// let image = try await session.withAccessToken(minimumValidity: .seconds(120)) { token in
    ///     try await imageLoader.load(url, bearer: token)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - minimumValidity: How long the token must stay valid; a token without a known expiry always qualifies.
    ///   - body: The work; it gets the token and must not keep it beyond its own end.
    /// - Returns: What `body` returns.
    /// - Throws: ``SessionError/Code/sessionEnded`` when the session ended before or while `body` ran (whatever
    ///   `body` returned); ``SessionError/Code/accessExpired`` when even a fresh token expires sooner than
    ///   `minimumValidity`, or the session cannot refresh; ``SessionError/Code/invalidInput`` for a negative
    ///   `minimumValidity`; refresh errors; what `body` throws.
    /// - Important: A token handed out cannot be recalled. When the session ends, `body`'s task is cancelled (it
    ///   sees `Task.isCancelled` and `CancellationError` at its next check, as any cancelled task does) and this
    ///   call throws `sessionEnded` — but the token itself stays valid at the server until it expires or a sign-out
    ///   revokes it (revocation, RFC 7009, is best effort), and a request `body` already sent, or a copy it kept,
    ///   is beyond SessionKit's reach. Hand the token only to code that stops when cancelled and keeps no copy.
    /// - Important: Where `body` sends the token is beyond SessionKit's reach too: no origin check applies here,
    ///   and the client `body` uses decides what a redirect does with it (see ``authorize(_:)`` for how to set up
    ///   a client that keeps the token on its origin).
    public func withAccessToken<Result: Sendable>(
        minimumValidity: Duration = .seconds(60),
        _ body: @escaping @Sendable (_ accessToken: String) async throws -> Result
    ) async throws -> Result {
        let token = try await freshAccessToken(minimumValidity: minimumValidity)
        let work = Task { try await body(token) }
        // Runs at once if the session has ended meanwhile.
        let key = addEndHandler { work.cancel() }
        defer { if let key { removeEndHandler(key) } }
        let result: Result
        do {
            result = try await withTaskCancellationHandler {
                try await work.value
            } onCancel: {
                work.cancel()
            }
        } catch {
            if !isActive { throw SessionError.ended }
            throw error
        }
        guard isActive else { throw SessionError.ended }
        return result
    }

    /// Returns `request` carrying this session's fresh access token, for a client SessionKit does not own.
    ///
    /// The token is refreshed first when it is about to expire (the same rule as ``data(for:)``'s, single flight).
    ///
    /// - Parameter request: The request; an `Authorization` header in it is replaced.
    /// - Returns: The request with `Authorization: Bearer <token>`; for DPoP-bound tokens `Authorization: DPoP
    ///   <token>` and a `DPoP` proof made now for this request's method and URL (send it once, soon: a server
    ///   refuses a proof it has seen or one that is old).
    /// - Throws: ``SessionError/Code/sessionEnded`` after ``end()``, and refresh errors.
    /// - Important: The request is yours: nothing cancels it when the session ends, a 401 is yours to handle, and
    ///   the token in it cannot be recalled (see ``withAccessToken(minimumValidity:_:)``). Prefer the session's own
    ///   requests (``data(for:)``, ``download(for:progress:)``, …), which ``end()`` cancels.
    /// - Important: SessionKit checks the request's URL against the session's ``Configuration/credentialScope``
    ///   (plain HTTP only to loopback, the named origins only) and throws ``SessionError/Code/insecureTransport``
    ///   or ``SessionError/Code/originNotServed`` instead of authorizing it, but it cannot see where the client
    ///   you send it with goes next. FoundationNetworking's `URLSession` follows a redirect by copying every header
    ///   field, this `Authorization` included, to whatever origin the `Location` names; so does any client that
    ///   copies headers on redirect. Send an authorized request only through a client that follows no redirect
    ///   (a `URLSessionTaskDelegate` whose `urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)`
    ///   completes with `nil`, then judge the 3xx yourself) or one that removes `Authorization` when the origin
    ///   changes (curl since 7.58, Python requests since 2.20, Go since 1.22.1 do).
    public func authorize(_ request: URLRequest) async throws -> URLRequest {
        if let refusal = configuration.credentialScope.refusal(of: request.url) { throw refusal }
        let token = try await freshAccessToken(minimumValidity: .zero)
        var authorized = request
        var (proofKey, nonce): (DPoPKey?, String?) = (nil, nil)
        if case .credential(let credential?, _, let origins) = lifetime(.credential(at: nil, nonceFor: request.url)) {
            (proofKey, nonce) = (credential.proofKey, origins)
        }
        try applyCredential(to: &authorized, token: token, proofKey: proofKey, nonce: nonce)
        return authorized
    }

    /// This session's access token, refreshed first (single flight) when it would expire within `minimumValidity`
    /// or within the refresh policy's margin.
    func freshAccessToken(minimumValidity: Duration) async throws -> String {
        guard minimumValidity >= .zero else {
            throw SessionError(.invalidInput, "minimumValidity must not be negative")
        }
        try Task.checkCancellation()
        if let refresher {
            try await refresher.refreshIfExpiring(self)
            guard let tokens else { throw SessionError.ended }
            if tokens.isExpired(at: configuration.clock.now, leeway: minimumValidity) {
                // Shared with a refresh already running; none starts if the token was replaced meanwhile.
                try await refresher.recover(self, rejectedToken: tokens.accessToken)
            }
        }
        guard case .held(let tokens?, _) = lifetime(.held(at: configuration.clock.now)) else {
            throw SessionError.ended
        }
        guard !tokens.isExpired(at: configuration.clock.now, leeway: minimumValidity) else {
            throw SessionError(
                .accessExpired,
                refresher == nil
                    ? "the access token expires within \(minimumValidity) and this session cannot refresh"
                    : "even a freshly refreshed access token expires within \(minimumValidity)"
            )
        }
        return tokens.accessToken
    }
}
