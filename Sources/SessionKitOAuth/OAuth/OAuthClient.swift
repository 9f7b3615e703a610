import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client side of an OAuth 2.0 authorization server: token grants (RFC 6749), PKCE (RFC 7636), the device
/// authorization grant (RFC 8628) and token revocation (RFC 7009).
///
/// It is the ``TokenEndpoint`` a ``UserSession`` refreshes with and the ``TokenRevoker`` sign-out revokes with:
///
/// ```swift
/// let client = OAuthClient(configuration: .init(
///     tokenEndpoint: URL(string: "https://id.example.com/token")!,
///     revocationEndpoint: URL(string: "https://id.example.com/revoke")!,
///     clientID: "my-app"))
/// let session = UserSession(account: account, tokens: tokens, store: store, tokenEndpoint: client)
/// ```
///
/// The client sends every request on one `URLSession` of its own, created with the client and invalidated when the
/// client is released: ephemeral, with no URL cache, no cookie storage and no credential storage, and never the
/// signed-in user's session (revocation runs after that one was invalidated). Token endpoint responses are never
/// cached, and a redirect is never followed: a credential is only ever posted to the URL it was configured for.
///
/// Answers are read by SessionKit's parsers (`TokenResponse`, `OAuthErrorResponse`,
/// ``DeviceAuthorizationResponse``, `RevocationRequest`); failures below HTTP become `networkUnavailable`
/// (refused, reset or lost connection, unknown host), `timedOut`, or `malformedResponse` (bytes that are not
/// HTTP). A token's expiry is measured from the moment its response arrived, on ``Configuration/clock``.
///
/// A confidential client (a server-side app acting for its users) sets ``Configuration/clientAuthentication``, and
/// a client whose tokens are for particular APIs sets ``Configuration/resources`` (RFC 8707) or
/// ``Configuration/audience``; see <doc:ServerSideClients>.
///
/// - Important: No token, code, verifier, password or client secret appears in any error, description or log line
///   this client produces. The client is thread-safe; calls run independently of each other. Cancelling the calling task
///   cancels the HTTP request in flight.
public final class OAuthClient: TokenEndpoint, TokenRevoker, Sendable, CustomStringConvertible {
    /// Where the authorization server is and how the client talks to it.
    public struct Configuration: Sendable {
        /// The token endpoint (RFC 6749 §3.2): `https`, or `http` to a loopback host.
        public var tokenEndpoint: URL
        /// The revocation endpoint (RFC 7009 §2), if the server has one.
        public var revocationEndpoint: URL?
        /// The device authorization endpoint (RFC 8628 §3.1), if the server has one.
        public var deviceAuthorizationEndpoint: URL?
        /// The authorization endpoint (RFC 6749 §3.1), if the app runs the authorization code grant.
        public var authorizationEndpoint: URL?
        /// The client identifier (RFC 6749 §2.2).
        public var clientID: String
        /// How the client authenticates (RFC 6749 §2.3): ``ClientAuthentication/none`` for a public client (the
        /// default), or a client secret for a confidential one. Used on every token grant, revocation and device
        /// authorization request; never in the authorization request URL.
        public var clientAuthentication: ClientAuthentication
        /// The resource servers the tokens are for (RFC 8707 §2): absolute URIs without a fragment, sent as one
        /// `resource` parameter each, in this order, on the authorization request, the device authorization request
        /// and every token grant (code exchange, refresh, device code, password). Empty (the default) sends none.
        /// A URI that is not acceptable makes the call throw `invalidInput` before anything is sent.
        public var resources: [URL]
        /// The `audience` parameter (Auth0, Okta) sent with ``resources``, or `nil` (the default) for none; an
        /// empty string is `invalidInput`.
        public var audience: String?
        /// The longest one HTTP exchange (a token request, a revocation attempt, a device authorization or poll)
        /// may take before it fails with `timedOut`: a wall-clock deadline that SessionKit enforces from sending the
        /// request to the last byte of the answer, however the server paces it, measured in real time whatever
        /// ``clock`` says.
        public var requestTimeout: Duration
        /// The clock that stamps responses (token expiry), paces device polling and waits between revocation
        /// attempts.
        public var clock: any SessionClock
        /// Whether the client asks for tokens bound to a DPoP key (RFC 9449): every grant that starts a sign-in (code,
        /// device code, password) makes a fresh key and sends a proof of it, and the tokens it returns carry the key
        /// (``TokenSet/proofKey``); a refresh of bound tokens always sends a proof of their key, whatever this says.
        /// For the authorization code grant the key is made with the authorization request, before the browser
        /// opens, and the code exchange proves that same key. Off by default; ``OpenIDProvider`` turns it on when
        /// the provider's metadata lists `dpop_signing_alg_values_supported` with ES256.
        public var usesDPoP: Bool
        /// Whether, with ``usesDPoP`` on, the authorization request binds the code to the sign-in's DPoP key: it
        /// carries the key's JWK thumbprint as `dpop_jkt` (RFC 9449 §10), and a server that supports it refuses to
        /// exchange the code without a proof of that key, so a code stolen from the redirect is useless.
        ///
        /// On by default: turning ``usesDPoP`` on says the server does DPoP, and a server that does not know
        /// `dpop_jkt` ignores it (RFC 6749 §3.1: unknown request parameters are ignored). Turn it off only for a
        /// server that refuses the parameter. Without ``usesDPoP`` it does nothing. ``OpenIDProvider`` sets it from
        /// the provider's metadata: on when `dpop_signing_alg_values_supported` lists ES256, off otherwise.
        public var bindsAuthorizationCodeToDPoPKey: Bool
        /// How revocation retries an answer of 503 or 429 and a lost connection: at most
        /// ``RetryPolicy/maximumAttempts`` attempts, waiting the policy's backoff (full jitter, `Retry-After` as a
        /// floor); a `Retry-After` longer than ``RetryPolicy/maximumDelay`` is not waited for.
        public var revocationRetry: RetryPolicy

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - tokenEndpoint: The token endpoint.
        ///   - revocationEndpoint: The revocation endpoint, if any.
        ///   - deviceAuthorizationEndpoint: The device authorization endpoint, if any.
        ///   - authorizationEndpoint: The authorization endpoint, if any.
        ///   - clientID: The client identifier.
        ///   - clientAuthentication: How the client authenticates; ``ClientAuthentication/none`` by default.
        ///   - resources: RFC 8707 resource indicators; none by default.
        ///   - audience: The `audience` parameter; none by default.
        ///   - requestTimeout: The wall-clock deadline of one HTTP exchange; 30 seconds by default.
        ///   - clock: The clock; `nil` (the default) reads the system's clocks (`ContinuousClock`, `Date()`).
        ///   - revocationRetry: Revocation retries; by default 3 attempts, waits of at most 5 seconds.
        ///   - usesDPoP: Whether sign-in grants ask for DPoP-bound tokens; off by default.
        ///   - bindsAuthorizationCodeToDPoPKey: Whether the authorization request sends `dpop_jkt` when ``usesDPoP``
        ///     is on; on by default.
        public init(
            tokenEndpoint: URL,
            revocationEndpoint: URL? = nil,
            deviceAuthorizationEndpoint: URL? = nil,
            authorizationEndpoint: URL? = nil,
            clientID: String,
            clientAuthentication: ClientAuthentication = .none,
            resources: [URL] = [],
            audience: String? = nil,
            requestTimeout: Duration = .seconds(30),
            clock: (any SessionClock)? = nil,
            revocationRetry: RetryPolicy = RetryPolicy(
                maximumAttempts: 3, baseDelay: .milliseconds(500), maximumDelay: .seconds(5),
                retryableStatuses: [429, 503]),
            usesDPoP: Bool = false,
            bindsAuthorizationCodeToDPoPKey: Bool = true
        ) {
            self.tokenEndpoint = tokenEndpoint
            self.revocationEndpoint = revocationEndpoint
            self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
            self.authorizationEndpoint = authorizationEndpoint
            self.clientID = clientID
            self.clientAuthentication = clientAuthentication
            self.resources = resources
            self.audience = audience
            self.requestTimeout = requestTimeout
            self.clock = clock ?? SystemClock()
            self.revocationRetry = revocationRetry
            self.usesDPoP = usesDPoP
            self.bindsAuthorizationCodeToDPoPKey = bindsAuthorizationCodeToDPoPKey
        }
    }

    /// The configuration the client was created with.
    public let configuration: Configuration
    package let transport: OAuthTransport
    /// The last `DPoP-Nonce` each origin gave this client (RFC 9449 §8), for its next proof there.
    package let dpopNonces = Lock<[String: String]>([:])

    /// Creates a client and its own `URLSession`.
    ///
    /// The configuration is checked when a request is made: an unusable endpoint or client ID makes that call
    /// throw `invalidInput`, and never sends anything.
    ///
    /// - Parameter configuration: The server's endpoints and the client's settings.
    public init(configuration: Configuration) {
        self.configuration = configuration
        self.transport = OAuthTransport(requestTimeout: configuration.requestTimeout, clock: configuration.clock)
    }

    /// Creates a client whose answers' `Date` headers set `serverClock`: an ``OpenIDProvider``'s client.
    package init(configuration: Configuration, serverClock: ProviderClock) {
        self.configuration = configuration
        self.transport = OAuthTransport(
            requestTimeout: configuration.requestTimeout, clock: configuration.clock, serverClock: serverClock)
    }

    /// The client ID, its authentication method (never the secret) and the token endpoint.
    public var description: String {
        "OAuthClient(client_id: \(configuration.clientID), client_auth: "
            + "\(configuration.clientAuthentication.methodName), token endpoint: \(configuration.tokenEndpoint))"
    }

    // MARK: - Token grants

    /// Exchanges a refresh token for new tokens (RFC 6749 §6).
    ///
    /// - Parameter refreshToken: The refresh token to present.
    /// - Returns: The new tokens; when the server rotates, the new refresh token is in it, otherwise its
    ///   ``TokenSet/refreshToken`` is `nil` and the caller keeps the old one.
    /// - Throws: ``SessionError``: `refreshRejected` (`invalid_grant`, or a 400 without an OAuth error: sign in
    ///   again), `providerOutage` (5xx, 429, with ``SessionError/retryAfter``), `malformedTokenResponse`,
    ///   `authorizationFailed` (another OAuth error), `networkUnavailable`, `timedOut`, `malformedResponse`,
    ///   `invalidInput`; `CancellationError` when the calling task is cancelled.
    public func refresh(using refreshToken: String) async throws -> TokenSet {
        try await requestTokens(.refreshToken(refreshToken, scope: nil))
    }

    /// Refreshes tokens bound to `proofKey` with a DPoP proof of it (RFC 9449 §5), or bearer tokens without.
    ///
    /// - Parameters:
    ///   - refreshToken: The refresh token.
    ///   - account: Whose it is (an OAuth client reads nothing about the user).
    ///   - proofKey: The key the tokens are bound to, if any.
    /// - Returns: The new tokens, bound to the same key.
    /// - Throws: As ``refresh(using:)``.
    public func refresh(using refreshToken: String, for account: Account, proofKey: DPoPKey?) async throws -> TokenSet {
        try await requestTokens(.refreshToken(refreshToken, scope: nil), proofKey: proofKey)
    }

    /// Exchanges the authorization code a callback answering `request` carried for tokens, proving possession of
    /// the request's PKCE verifier and sending its redirect URI (RFC 6749 §4.1.3, RFC 7636 §4.5).
    ///
    /// When the request was made with a DPoP key (``Configuration/usesDPoP``), the exchange sends a proof of that
    /// key, the one its `dpop_jkt` named (RFC 9449 §10), and the tokens are bound to it; no other key is made.
    ///
    /// - Parameters:
    ///   - code: The code from ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)``.
    ///   - request: The authorization request the code answers.
    /// - Returns: The tokens.
    /// - Throws: ``SessionError``: `authorizationFailed` when the server refuses the code (`invalid_grant` here
    ///   refuses the code or the verifier, not a refresh token; ``SessionError/oauthError`` says which error),
    ///   and otherwise as ``refresh(using:)``.
    public func exchange(code: String, for request: AuthorizationRequest) async throws -> TokenSet {
        try await exchange(
            code: code, pkce: request.pkce, redirectURI: request.redirectURI, proofKey: request.proofKey)
    }

    /// ``exchange(code:for:)`` with the PKCE pair and redirect URI given apart.
    ///
    /// - Parameters:
    ///   - code: The code from ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)``.
    ///   - pkce: The pair whose challenge the authorization request carried.
    ///   - redirectURI: The redirect URI the authorization request carried, exactly.
    ///   - proofKey: The DPoP key the authorization request was made with; `nil` makes a fresh one when the client
    ///     uses DPoP (the code is then bound to no key).
    /// - Returns: The tokens.
    /// - Throws: ``SessionError``: `authorizationFailed` when the server refuses the code (`invalid_grant` here
    ///   refuses the code or the verifier, not a refresh token; ``SessionError/oauthError`` says which error),
    ///   and otherwise as ``refresh(using:)``.
    package func exchange(
        code: String, pkce: PKCE, redirectURI: String, proofKey: DPoPKey? = nil
    ) async throws -> TokenSet {
        do {
            return try await requestTokens(
                .authorizationCode(code: code, codeVerifier: pkce.verifier, redirectURI: redirectURI),
                proofKey: proofKey)
        } catch let error as SessionError where error.code == .refreshRejected {
            throw SessionError(
                .authorizationFailed, "the token endpoint refused the authorization code: invalid_grant",
                statusCode: error.statusCode, oauthError: error.oauthError)
        }
    }

    /// Exchanges a username and password for tokens (RFC 6749 §4.3).
    ///
    /// FOR TESTS ONLY: the grant hands the user's password to the app, which the OAuth 2.0 Security BCP
    /// (RFC 9700 §2.4) forbids. It exists to drive a test authorization server without a browser.
    ///
    /// - Parameters:
    ///   - username: The resource owner's username.
    ///   - password: Their password.
    ///   - scope: The scope to ask for, or `nil` for the server's default.
    /// - Returns: The tokens.
    /// - Throws: ``SessionError``: `authorizationFailed` for a wrong username or password (`invalid_grant`), and
    ///   otherwise as ``refresh(using:)``.
    package func password(username: String, password: String, scope: String? = nil) async throws -> TokenSet {
        do {
            return try await requestTokens(.password(username: username, password: password, scope: scope))
        } catch let error as SessionError where error.code == .refreshRejected {
            throw SessionError(
                .authorizationFailed, "the token endpoint refused the credentials: invalid_grant",
                statusCode: error.statusCode, oauthError: error.oauthError)
        }
    }

    /// Builds the authorization request that starts an authorization code grant, with a fresh PKCE pair and state.
    ///
    /// With ``Configuration/usesDPoP`` on, it makes the sign-in's DPoP key too, which ``exchange(code:for:)`` proves;
    /// with ``Configuration/bindsAuthorizationCodeToDPoPKey`` as well, the URL carries the key's thumbprint as
    /// `dpop_jkt` (RFC 9449 §10).
    ///
    /// Open ``AuthorizationRequest/url``; when the browser comes back, read the code with
    /// ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)`` and pass it to ``exchange(code:for:)``
    /// with this request.
    ///
    /// - Parameters:
    ///   - redirectURI: The registered redirect URI.
    ///   - scope: The scope to ask for, or `nil` for the server's default.
    ///   - additionalParameters: Extra query parameters (`prompt`, `login_hint`, …), none of them in
    ///     ``AuthorizationRequest/reservedParameterNames``; added in name order.
    /// - Returns: The request; keep it until the callback arrives.
    /// - Throws: `SessionError(.invalidInput)` when no authorization endpoint is configured or an argument is not
    ///   acceptable; `SessionError(.storageFailure)` when the platform cannot make a DPoP key.
    public func authorizationRequest(
        redirectURI: String, scope: String? = nil, additionalParameters: [String: String] = [:]
    ) throws -> AuthorizationRequest {
        try authorizationRequest(
            redirectURI: redirectURI, scope: scope, nonce: nil, additionalParameters: additionalParameters)
    }

    /// ``authorizationRequest(redirectURI:scope:additionalParameters:)`` with an OpenID Connect nonce.
    package func authorizationRequest(
        redirectURI: String, scope: String?, nonce: String?, additionalParameters: [String: String]
    ) throws -> AuthorizationRequest {
        guard let endpoint = configuration.authorizationEndpoint else {
            throw SessionError(.invalidInput, "the OAuth client has no authorization endpoint configured")
        }
        // The key is made before the request, so the request can bind the code to it and the exchange prove it.
        let proofKey = configuration.usesDPoP ? try DPoPKey.generate() : nil
        return try AuthorizationRequest(
            authorizationEndpoint: endpoint, clientID: configuration.clientID, redirectURI: redirectURI,
            scope: scope, nonce: nonce, pkce: PKCE(), proofKey: proofKey,
            sendsProofKeyThumbprint: configuration.bindsAuthorizationCodeToDPoPKey, indicators: indicators(),
            additionalParameters: additionalParameters)
    }

    /// Sends one token request and reads the answer; with a DPoP key, a proof of it, sent once more with the server's
    /// nonce when the server asks for one (RFC 9449 §8).
    ///
    /// - Parameters:
    ///   - grant: The grant.
    ///   - proofKey: The key of tokens being refreshed, or of the authorization request a code exchange answers;
    ///     `nil` makes a fresh one for a sign-in grant when the client uses DPoP.
    /// - Returns: The tokens, their expiry measured from the arrival of the response.
    /// - Throws: The classified error.
    package func requestTokens(_ grant: TokenRequest.Grant, proofKey: DPoPKey? = nil) async throws -> TokenSet {
        let tokenRequest = try makeTokenRequest(grant)
        let key = try proofKey ?? grantKey(for: grant)
        var askedForNonce = false
        while true {
            let request = try tokenURLRequest(tokenRequest, proofKey: key)
            let answer = try await transport.send(request, to: "the token endpoint")
            if key != nil, !askedForNonce, answerAsksForNonce(answer) {
                // RFC 9449 §8: the proof was refused for its nonce, not the request: once more, with the nonce.
                askedForNonce = true
                diagnoseNonceRetry()
                continue
            }
            do {
                return try TokenResponse.parse(
                    data: answer.body, statusCode: answer.statusCode, receivedAt: answer.receivedAt,
                    receivedAtWall: answer.receivedAtWall, retryAfter: answer.retryAfter, proofKey: key)
            } catch let error as SessionError {
                // A server's error_description may quote what it was sent: the refresh token, the code, the secret.
                throw Self.refusedGrant(error, grant).redacting(tokenRequest.secrets)
            }
        }
    }

    /// `error`, or for a refresh answered `400` without an OAuth error body, the refresh token refused
    /// (`refreshRejected`), as `invalid_grant` would say.
    ///
    /// RFC 6749 §5.2 answers a refused token request with 400 and an error code; some servers answer a refresh
    /// token they revoked or expired with the 400 alone. The request is SessionKit's own and only its refresh token
    /// changes from one refresh to the next, so a 400 refuses that token: it is not transient (retrying presents the
    /// same dead token), and taking it for anything but a rejected grant leaves a session that fails every refresh
    /// and never asks the user to sign in again. Other statuses without an OAuth body (a proxy's 401 or 403, a
    /// wrong endpoint's 404) say nothing about the grant and stay `authorizationFailed`; a 400 that names another
    /// OAuth error keeps it.
    package static func refusedGrant(_ error: SessionError, _ grant: TokenRequest.Grant) -> SessionError {
        guard case .refreshToken = grant, error.code == .authorizationFailed, error.statusCode == 400,
            error.oauthError == nil
        else { return error }
        return SessionError(
            .refreshRejected,
            "the token endpoint refused the refresh token (400) without an OAuth error: taken as invalid_grant",
            statusCode: 400)
    }

    /// A fresh DPoP key for a grant that starts a sign-in, when the client asks for bound tokens.
    package func grantKey(for grant: TokenRequest.Grant) throws -> DPoPKey? {
        guard configuration.usesDPoP else { return nil }
        if case .refreshToken = grant { return nil }
        return try DPoPKey.generate()
    }

    /// The token endpoint request for `tokenRequest`, with a DPoP proof of `proofKey` when given.
    package func tokenURLRequest(_ tokenRequest: TokenRequest, proofKey: DPoPKey?) throws -> URLRequest {
        var request = try tokenRequest.urlRequest(
            endpoint: configuration.tokenEndpoint, now: configuration.clock.wallNow)
        if let proofKey {
            let origin = Origin(configuration.tokenEndpoint)?.description ?? ""
            let proof = try DPoPProof.make(
                key: proofKey, method: "POST", url: configuration.tokenEndpoint, accessToken: nil,
                nonce: dpopNonces.withLock { $0[origin] }, now: configuration.clock.wallNow)
            request.setFieldValues([("DPoP", proof)])
        }
        return request
    }

    /// Keeps the answer's `DPoP-Nonce` for its origin, and says whether the answer refused a proof for its nonce
    /// (`use_dpop_nonce`, RFC 9449 §8) and gave a new one.
    package func answerAsksForNonce(_ answer: OAuthTransport.Answer) -> Bool {
        guard let nonce = answer.dpopNonce, !nonce.isEmpty else { return false }
        let origin = Origin(configuration.tokenEndpoint)?.description ?? ""
        dpopNonces.withLock { $0[origin] = nonce }
        return answer.statusCode == 400 && OAuthErrorResponse.parse(answer.body)?.error == "use_dpop_nonce"
    }

    /// Tells the caller's observer (``ExchangeEvents``) that the token endpoint asked for a DPoP nonce and the
    /// request goes once more.
    package func diagnoseNonceRetry() {
        guard let events = ExchangeEvents.current else { return }
        events.nonceRetry("token", Origin(configuration.tokenEndpoint).map { "\($0)" } ?? "?")
    }

    /// The token request for `grant`, authenticated as configured and carrying the configured resources and
    /// audience.
    ///
    /// - Parameter grant: The grant.
    /// - Returns: The request.
    /// - Throws: `SessionError(.invalidInput)` for an unusable grant or configuration.
    package func makeTokenRequest(_ grant: TokenRequest.Grant) throws -> TokenRequest {
        try TokenRequest(
            grant: grant, clientID: configuration.clientID, authentication: configuration.clientAuthentication,
            indicators: indicators())
    }

    /// The configured resources and audience, checked.
    ///
    /// - Returns: The indicators.
    /// - Throws: `SessionError(.invalidInput)` for a resource that is not an absolute URI without a fragment, or an
    ///   empty audience.
    package func indicators() throws -> ResourceIndicators {
        try ResourceIndicators(resources: configuration.resources, audience: configuration.audience)
    }
}
