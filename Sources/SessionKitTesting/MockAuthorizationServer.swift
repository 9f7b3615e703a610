import Foundation
import SessionKit

/// An OAuth 2.0 authorization server and resource server on loopback, for testing clients against real sockets:
/// token endpoint, revocation, device authorization, an authorization endpoint, and a protected resource, with
/// failures, delays and gates a test injects.
///
/// ```swift
/// try await MockAuthorizationServer.withRunning { mock in
///     try mock.addUser("alice")
///     let session = UserSession(
///         account: Account(issuer: mock.issuer, subject: "alice"),
///         tokens: try mock.issueTokens(for: "alice"),
///         tokenEndpoint: mock.makeClient())
///     mock.invalidateAccessTokens(for: "alice")
///     _ = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))  // refreshes once, then succeeds
///     #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
/// }
/// ```
///
/// Endpoints, all under ``baseURL``:
///
/// - `POST /token` (``tokenEndpoint``): the `refresh_token`, `authorization_code` (PKCE `S256` required and
///   verified), `password` and device code grants. Refresh tokens rotate when
///   ``Configuration/rotatesRefreshTokens`` is on; presenting a rotated one again revokes the whole grant and
///   answers `invalid_grant` (reuse detection, RFC 9700 §4.14.2), as does presenting an authorization code twice.
///   Every refresh token presented more than once is counted (``repeatedRefreshTokenCount(for:)``).
/// - `POST /revoke` (``revocationEndpoint``, RFC 7009): 200 for any token, known or not. Revoking a refresh token
///   revokes its grant, access tokens included.
/// - `POST /device` (``deviceAuthorizationEndpoint``, RFC 8628): codes the test then approves or denies with
///   ``approveDevice(userCode:as:)`` and ``denyDevice(userCode:)``.
/// - `GET /authorize` (``authorizationEndpoint``): redirects to the request's redirect URI with a code, or with
///   `error=access_denied`, as ``approveNextAuthorization(as:)`` or ``denyNextAuthorization()`` queued; without
///   a queued decision it answers 200 with a sign-in page. `GET /callback` (``callbackURL``) answers 200, so a
///   client that follows the redirect ends on a URL that carries the code.
/// - `GET /api/me` (``userInfoEndpoint``): `{"user":"alice"}` for an active access token, otherwise 401 with
///   `WWW-Authenticate: Bearer error="invalid_token"` (RFC 6750 §3). Add more protected routes with
///   ``protectedRoute(_:_:_:)``, or any route on ``server``.
///
/// With ``Configuration/openID`` on, the server is an OpenID Connect provider whose issuer is ``issuer``:
///
/// - `GET /.well-known/openid-configuration` (``openIDConfigurationURL``): the discovery document, naming the
///   endpoints here and `ES256` as the only ID token signing algorithm.
/// - `GET /.well-known/oauth-authorization-server` (``authorizationServerMetadataURL``): the RFC 8414 metadata. The
///   revocation endpoint is named in both documents, or only in this one, or in neither
///   (``Configuration/revocationEndpointListing``).
/// - `GET /jwks` (``keySetURL``): one P-256 key, generated for this server, whose `kid` is its RFC 7638
///   thumbprint.
/// - ID tokens, signed ES256, in every token response whose grant's scope has `openid`: the code exchange (with the
///   authorization request's `nonce`), the password and device grants, and refreshes (the same `sub`, no
///   `nonce`). Their claims are `iss`, `sub` and `name` (the user's name), `aud` (the client ID), `iat`,
///   `exp` (five minutes later), `auth_time` and `at_hash`. ``tamperNextIDToken(_:times:)`` makes the next ones
///   wrong in a chosen way, to test that an app refuses them.
/// - `GET /userinfo` (``openIDUserInfoEndpoint``): `{"sub":"alice","name":"alice"}` for an active access token.
/// - `GET /logout` (``endSessionEndpoint``, RP-Initiated Logout 1.0): with an ID token this server issued as
///   `id_token_hint` and the client's `client_id`, revokes every grant of that user and redirects (302) to
///   `post_logout_redirect_uri` with `state`; otherwise 400. Logged in ``endSessions``.
///
/// With ``Configuration/dpop`` on, the server binds tokens to DPoP keys (RFC 9449):
///
/// - The token endpoint checks a request's `DPoP` proof: one header, `typ` `dpop+jwt`, `alg` `ES256`, a public
///   `jwk` (no `d`) whose signature verifies, `htm` `POST`, `htu` the token endpoint's URL, `iat` within 60 seconds of
///   ``Configuration/clock``, a `jti` it never saw, and with ``Configuration/requiresDPoPNonce`` the server's nonce
///   (else `use_dpop_nonce` and a `DPoP-Nonce` header). A refused proof is `400 invalid_dpop_proof`. A valid one binds
///   the tokens the grant issues to its key's thumbprint (`token_type` `DPoP`). A bound refresh token is refreshed
///   only with a proof of the same key: another key is `invalid_grant`, no proof `invalid_dpop_proof`.
/// - An authorization request's `dpop_jkt` (RFC 9449 §10) binds its code to that key thumbprint: the code is exchanged
///   only with a proof of that key; another key or no proof is `400 invalid_dpop_proof`.
///   ``authorizationKeyThumbprints`` records each request's `dpop_jkt`, with DPoP on or off.
/// - The resources (`/api/me`, `/userinfo`, ``protectedRoute(_:_:_:)``, ``checkAccess(_:)`` and
///   ``user(authorizing:)``) accept a bound access token only as `Authorization: DPoP` with a valid proof for the
///   request (`htm`, `htu`, and `ath` the token's hash, by the token's key). A bound token as `Bearer` is refused with
///   `WWW-Authenticate: DPoP error="invalid_token"`; a refused proof (a replayed `jti` among them) with
///   `error="invalid_dpop_proof"`. Unbound tokens work as bearer tokens as before.
/// - ``dpopProofs`` records every proof checked, with its claims, its key and why it was refused, if it was;
///   ``jtiReplayCount`` and ``unprovenBoundTokenCount`` count what a correct client never does.
///
/// The token, revocation, device, authorization and OpenID endpoints send a `Date` header on the wall time of
/// ``Configuration/clock``, which an OpenID client reads as the provider's clock; the resource routes send none.
///
/// Tokens are `at-<user>-<128 random bits>` and `rt-<user>-<128 random bits>`: a failing test shows whose a
/// token is, and no test can guess one.
///
/// - Important: Thread-safe. Every handler runs in its own task; state changes happen under one lock, so
///   concurrent requests see a consistent server. As a real server does, the mock finishes processing a request
///   whose client went away (a held request is processed when its client leaves, if not before).
public final class MockAuthorizationServer: Sendable {
    /// The loopback HTTP server underneath: its request log, and a place for a test's own routes.
    public let server: LocalServer
    let core: MockAuthorizationCore

    private init(server: LocalServer, core: MockAuthorizationCore) {
        self.server = server
        self.core = core
        core.install(on: server)
    }

    /// Starts a server on 127.0.0.1 with a port the system picks.
    ///
    /// - Parameter configuration: How tokens are issued.
    /// - Returns: The running server.
    /// - Throws: What ``LocalServer/start(configuration:handler:)`` throws; `SessionError(.invalidInput)` for a
    ///   client ID that is empty; an error of the platform's cryptography when it cannot generate the OpenID
    ///   provider's signing key.
    /// - Important: Call ``stop()`` when done, or use ``withRunning(configuration:isolation:_:)``.
    public static func start(configuration: Configuration = .init()) async throws -> MockAuthorizationServer {
        guard !configuration.clientID.isEmpty else {
            throw SessionError(.invalidInput, "the mock authorization server's client ID is empty")
        }
        let server = try await LocalServer.start(configuration: configuration.server)
        do {
            let core = try MockAuthorizationCore(configuration: configuration, baseURL: server.baseURL)
            return MockAuthorizationServer(server: server, core: core)
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Starts a server, runs `body` with it, and stops it, whether `body` returns or throws.
    ///
    /// - Parameters:
    ///   - configuration: How tokens are issued.
    ///   - isolation: The caller's actor, inherited so `body` may touch its state.
    ///   - body: The work to do while the server runs.
    /// - Returns: What `body` returns.
    /// - Throws: What ``start(configuration:)`` or `body` throws; the server is stopped first.
    public static func withRunning<T>(
        configuration: Configuration = .init(),
        isolation: isolated (any Actor)? = #isolation,
        _ body: (MockAuthorizationServer) async throws -> T
    ) async throws -> T {
        let mock = try await start(configuration: configuration)
        do {
            let result = try await body(mock)
            await mock.stop()
            return result
        } catch {
            await mock.stop()
            throw error
        }
    }

    /// Stops the server: closes every connection and cancels every handler, held ones included.
    public func stop() async {
        await server.stop()
    }

    // MARK: - Addresses

    /// The server's root URL, `http://127.0.0.1:<port>/`.
    public var baseURL: URL { server.baseURL }
    /// The issuer identifier: the base URL without its trailing slash. Authorization redirects carry it as `iss`.
    public var issuer: String { core.issuer }
    /// `POST /token`.
    public var tokenEndpoint: URL { server.url("/token") }
    /// `POST /revoke`.
    public var revocationEndpoint: URL { server.url("/revoke") }
    /// `POST /device`.
    public var deviceAuthorizationEndpoint: URL { server.url("/device") }
    /// `GET /authorize`.
    public var authorizationEndpoint: URL { server.url("/authorize") }
    /// `GET /callback`: a redirect URI on this server, so following the redirect ends on a URL with the code.
    public var callbackURL: URL { server.url("/callback") }
    /// `GET /api/me`: the protected resource.
    public var userInfoEndpoint: URL { server.url("/api/me") }

    /// The URL of a path on this server.
    ///
    /// - Parameter pathAndQuery: Such as `/api/me`.
    /// - Returns: The absolute URL.
    public func url(_ pathAndQuery: String) -> URL {
        server.url(pathAndQuery)
    }

    /// An ``/SessionKit/OAuthClient`` configured for this server's endpoints.
    ///
    /// - Parameters:
    ///   - clientID: The client ID to send; this server's ``Configuration/clientID`` by default.
    ///   - clock: The client's clock; the system's when `nil`.
    ///   - requestTimeout: The client's wall-clock deadline on one exchange.
    ///   - revocationRetry: The client's revocation retries; the client's default when `nil`.
    ///   - usesDPoP: Whether the client asks for DPoP-bound tokens
    ///     (``/SessionKit/OAuthClient/Configuration/usesDPoP``); when `nil`, whether this server's
    ///     ``Configuration/dpop`` is on.
    /// - Returns: The client.
    public func makeClient(
        clientID: String? = nil,
        clock: (any SessionClock)? = nil,
        requestTimeout: Duration = .seconds(30),
        revocationRetry: RetryPolicy? = nil,
        usesDPoP: Bool? = nil
    ) -> OAuthClient {
        var configuration = OAuthClient.Configuration(
            tokenEndpoint: tokenEndpoint,
            revocationEndpoint: revocationEndpoint,
            deviceAuthorizationEndpoint: deviceAuthorizationEndpoint,
            authorizationEndpoint: authorizationEndpoint,
            clientID: clientID ?? core.clientID,
            requestTimeout: requestTimeout,
            clock: clock,
            usesDPoP: usesDPoP ?? core.dpop
        )
        if let revocationRetry { configuration.revocationRetry = revocationRetry }
        return OAuthClient(configuration: configuration)
    }

    // MARK: - Users and tokens

    /// Registers a user who can sign in.
    ///
    /// - Parameters:
    ///   - name: 1 to 64 characters of `A–Z a–z 0–9 . _ -`; it appears in the user's tokens.
    ///   - password: The password the `password` grant checks.
    /// - Throws: `SessionError(.invalidInput)` for a name or password that breaks the rules, or a name already taken.
    public func addUser(_ name: String, password: String = "password") throws {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
        guard (1...64).contains(name.count), name.allSatisfy(allowed.contains) else {
            throw SessionError(.invalidInput, "a mock user's name must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
        }
        guard !password.isEmpty else { throw SessionError(.invalidInput, "a mock user's password is empty") }
        let added = core.state.withLock { state -> Bool in
            guard state.users[name] == nil else { return false }
            state.users[name] = password
            return true
        }
        guard added else { throw SessionError(.invalidInput, "the mock already has a user named \(name)") }
    }

    /// Starts a grant for `user` without a request, as if they had signed in earlier, and returns its tokens.
    ///
    /// - Parameters:
    ///   - user: A registered user.
    ///   - scope: The grant's scope, if any. With `openid` in it, and ``Configuration/openID`` on, the tokens carry
    ///     an ID token (without a nonce), which ``tamperNextIDToken(_:times:)`` applies to as well.
    ///   - clock: The clock the returned token set's expiry is measured on (the client's); the system's when `nil`.
    ///   - proofKey: A DPoP key to bind the tokens to, as if the sign-in had sent a proof of it (RFC 9449 §5): the
    ///     token set is of type `DPoP` and carries the key. Requires ``Configuration/dpop``.
    /// - Returns: The tokens, as a client would have received them now.
    /// - Throws: `SessionError(.invalidInput)` when the user is unknown, or for a `proofKey` while
    ///   ``Configuration/dpop`` is off; an error of the platform's cryptography when the ID token cannot be signed.
    public func issueTokens(
        for user: String, scope: String? = nil, clock: (any SessionClock)? = nil, proofKey: DPoPKey? = nil
    ) throws -> TokenSet {
        guard proofKey == nil || core.dpop else {
            throw SessionError(.invalidInput, "the mock binds tokens to DPoP keys only with Configuration.dpop on")
        }
        let (now, wallNow) = (core.clock.now, core.clock.wallNow)
        let issued = core.state.withLock { state -> MockAuthorizationState.Issued? in
            guard state.users[user] != nil else { return nil }
            return state.startFamily(user: user, scope: scope, now: now, authTime: wallNow, jkt: proofKey?.thumbprint)
        }
        guard let issued else { throw SessionError(.invalidInput, "the mock has no user named \(user)") }
        return TokenSet(
            accessToken: issued.accessToken, refreshToken: issued.refreshToken,
            idToken: try issued.idToken.flatMap { try core.signIDToken($0, now: wallNow) }, scope: issued.scope,
            tokenType: proofKey == nil ? "Bearer" : "DPoP", proofKey: proofKey, lifetime: issued.lifetime,
            receivedAt: (clock ?? SystemClock()).now, receivedAtWall: (clock ?? SystemClock()).wallNow)
    }

    /// Whether `token` is an access token the resource would accept now, or a refresh token the token endpoint
    /// would accept now (token introspection, as RFC 7662 `active` means it).
    ///
    /// - Parameter token: Any token.
    /// - Returns: `false` for unknown, expired, revoked and rotated tokens.
    public func isActive(token: String) -> Bool {
        let now = core.clock.now
        return core.state.withLock { $0.isActive(token, now: now) }
    }

    /// Revokes every grant of `user` on the server side, as an administrator or a password change would: every
    /// access and refresh token the user holds stops working.
    ///
    /// - Parameter user: The user.
    public func revokeAll(for user: String) {
        core.state.withLock { state in
            for (id, family) in state.families where family.user == user { state.revokeFamily(id) }
        }
    }

    /// Makes every access token of `user` invalid, leaving their refresh tokens valid: the resource answers 401
    /// and a refresh succeeds, as after a key rotation or an early expiry.
    ///
    /// - Parameter user: The user.
    public func invalidateAccessTokens(for user: String) {
        core.state.withLock { state in
            for (token, entry) in state.accessIndex where entry.user == user {
                state.accessIndex[token]?.isRevoked = true
            }
        }
    }

    /// Every access token issued to `user`, oldest first, active or not.
    ///
    /// - Parameter user: The user.
    /// - Returns: The tokens.
    public func accessTokens(issuedTo user: String) -> [String] {
        core.state.withLock { state in
            state.families.keys.sorted().compactMap { state.families[$0] }.filter { $0.user == user }
                .flatMap(\.accessTokens)
        }
    }

    /// The user whose active access token `request` carries, if it does: as a bearer token when the token is not
    /// bound, or with ``Configuration/dpop`` on as `Authorization: DPoP` with a valid proof of its key. To answer a
    /// refused request with the right challenge (and a DPoP nonce), use ``checkAccess(_:)``.
    ///
    /// - Parameter request: A request to one of the test's own routes.
    /// - Returns: The user, or `nil` when the request has no token, it is not active, or its proof is refused.
    /// - Important: A DPoP proof is checked, and its `jti` remembered, on every call (see ``checkAccess(_:)``).
    public func user(authorizing request: LocalServer.Request) -> String? {
        guard case .granted(let user) = core.checkAccess(request) else { return nil }
        return user
    }

    // MARK: - The user's decisions

    /// Queues a decision for the next authorization request: `user` signs in and approves.
    ///
    /// - Parameter user: A registered user.
    /// - Throws: `SessionError(.invalidInput)` when the user is unknown.
    public func approveNextAuthorization(as user: String) throws {
        let known = core.state.withLock { state -> Bool in
            guard state.users[user] != nil else { return false }
            state.authorizationDecisions.append(user)
            return true
        }
        guard known else { throw SessionError(.invalidInput, "the mock has no user named \(user)") }
    }

    /// Queues a decision for the next authorization request: the user denies it (`error=access_denied`).
    public func denyNextAuthorization() {
        core.state.withLock { $0.authorizationDecisions.append(nil) }
    }

    /// Approves a pending device authorization as `user`; the next poll receives tokens.
    ///
    /// - Parameters:
    ///   - userCode: The user code the device showed.
    ///   - user: A registered user.
    /// - Throws: `SessionError(.invalidInput)` when the code is not pending or the user is unknown.
    public func approveDevice(userCode: String, as user: String) throws {
        let done = core.state.withLock { state -> Bool in
            state.users[user] != nil && state.decideDevice(userCode: userCode, .approved(user))
        }
        guard done else { throw SessionError(.invalidInput, "no pending device authorization for that user code") }
    }

    /// Denies a pending device authorization; the next poll receives `access_denied`.
    ///
    /// - Parameter userCode: The user code the device showed.
    /// - Throws: `SessionError(.invalidInput)` when the code is not pending.
    public func denyDevice(userCode: String) throws {
        let done = core.state.withLock { $0.decideDevice(userCode: userCode, .denied) }
        guard done else { throw SessionError(.invalidInput, "no pending device authorization for that user code") }
    }

    /// Expires a pending device authorization now; the next poll receives `expired_token`.
    ///
    /// - Parameter userCode: The user code the device showed.
    /// - Throws: `SessionError(.invalidInput)` when the code is not pending.
    public func expireDevice(userCode: String) throws {
        let now = core.clock.now
        let done = core.state.withLock { state -> Bool in
            guard let entry = state.devices.first(where: { $0.value.userCode == userCode }),
                case .pending = entry.value.decision
            else { return false }
            state.devices[entry.key]?.expiresAt = now
            return true
        }
        guard done else { throw SessionError(.invalidInput, "no pending device authorization for that user code") }
    }

    // MARK: - Behaviour

    /// Whether refreshes rotate the refresh token; see ``Configuration/rotatesRefreshTokens``.
    public var rotatesRefreshTokens: Bool {
        get { core.state.withLock { $0.settings.rotatesRefreshTokens } }
        set { core.state.withLock { $0.settings.rotatesRefreshTokens = newValue } }
    }

    /// The lifetime of access tokens issued from now on; see ``Configuration/accessTokenLifetime``.
    public var accessTokenLifetime: Duration? {
        get { core.state.withLock { $0.settings.accessTokenLifetime } }
        set { core.state.withLock { $0.settings.accessTokenLifetime = newValue } }
    }

    /// Makes the next `times` requests to `endpoint` fail with `failure`, after any failures already queued.
    ///
    /// - Parameters:
    ///   - endpoint: The endpoint.
    ///   - failure: What goes wrong.
    ///   - times: How many requests in a row it happens to.
    public func failNext(_ endpoint: Endpoint, with failure: Failure, times: Int = 1) {
        guard times > 0 else { return }
        core.controls.withLock { $0.failures[endpoint, default: []] += Array(repeating: failure, count: times) }
    }

    /// Delays every answer of `endpoint` by `delay` (after processing), or stops delaying with `nil`.
    ///
    /// - Parameters:
    ///   - delay: The delay, or `nil`.
    ///   - endpoint: The endpoint.
    public func setDelay(_ delay: Duration?, for endpoint: Endpoint) {
        core.controls.withLock { $0.delays[endpoint] = delay }
    }

    /// Holds the next request to `endpoint` at `gate` until the test opens it (or the client goes away).
    ///
    /// Each call holds one more request: the first request to arrive takes the first gate queued. Use
    /// ``Gate/waitForArrivals(_:)`` to know that the request has arrived.
    ///
    /// - Parameters:
    ///   - endpoint: The endpoint.
    ///   - gate: The gate to wait at.
    ///   - afterProcessing: `false` holds the request before the server acts on it; `true` lets the server act
    ///     (rotate, issue) and holds only the answer.
    public func holdNext(_ endpoint: Endpoint, at gate: Gate, afterProcessing: Bool = false) {
        core.controls.withLock { $0.holds[endpoint, default: []].append((gate, afterProcessing)) }
    }

    /// Answers `path` with `handler` for requests that carry an active access token (with a valid DPoP proof when it
    /// is bound, see ``checkAccess(_:)``), and with 401 and a challenge for the others; failures, delays and gates of
    /// ``Endpoint/resource`` apply.
    ///
    /// - Parameters:
    ///   - method: The method, or `nil` for any.
    ///   - path: The path, compared exactly.
    ///   - handler: Answers an authorized request; receives the request and its user.
    public func protectedRoute(
        _ method: String?,
        _ path: String,
        _ handler: @escaping @Sendable (LocalServer.Request, String) async -> LocalServer.Response
    ) {
        let core = core
        server.route(method, path) { request in
            await core.serveProtected(request, handler)
        }
    }

    // MARK: - Counters

    /// How many requests reached the token endpoint, whatever their grant or fate.
    public var tokenRequestCount: Int { core.state.withLock { $0.tokenRequestTotal } }

    /// How many requests reached the token endpoint with `grant`.
    ///
    /// - Parameter grant: The grant type.
    /// - Returns: The count, injected failures included.
    public func tokenRequestCount(grant: Grant) -> Int {
        core.state.withLock { $0.tokenRequests[grant.rawValue, default: 0] }
    }

    /// How many requests reached the revocation endpoint.
    public var revocationRequestCount: Int { core.state.withLock { $0.revocationRequests } }

    /// How many requests reached the device authorization endpoint.
    public var deviceAuthorizationRequestCount: Int { core.state.withLock { $0.deviceAuthorizationRequests } }

    /// How many times a rotated refresh token or a used authorization code was presented again (each revoked a
    /// grant).
    public var reuseDetectionCount: Int { core.state.withLock { $0.reuseDetections } }

    /// While refresh tokens rotate: how many refresh tokens reached the refresh grant more than once, each counted
    /// once, whatever the answer — also those presented again after their grant was revoked for another reason
    /// (which ``reuseDetectionCount`` does not count). A client that keeps its user signed in never presents one
    /// twice.
    public var repeatedRefreshTokenCount: Int { core.state.withLock { $0.repeatedRefreshTokens.values.reduce(0, +) } }

    /// How many of `user`'s refresh tokens reached the refresh grant more than once (see
    /// ``repeatedRefreshTokenCount``).
    ///
    /// - Parameter user: The user.
    /// - Returns: The count.
    public func repeatedRefreshTokenCount(for user: String) -> Int {
        core.state.withLock { $0.repeatedRefreshTokens[user, default: 0] }
    }

    /// Every request the server received, in arrival order (``LocalServer/requests``).
    public var requests: [RecordedRequest] { server.requests }
}
