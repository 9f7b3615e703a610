import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One client of an OpenID Connect provider: an ``OAuthClient`` made from the provider's discovery document, and
/// what OpenID Connect adds to it: sign-in that proves who signed in, refreshes that keep proving it, and the
/// provider's sign-out.
///
/// ```swift
/// let provider = OpenIDProvider(configuration: .init(
///     issuer: URL(string: "https://id.example.com")!, clientID: "my-app"))
/// let signIn = try await provider.authorizeInBrowser { url in openInBrowser(url) }
/// try await manager.signIn(signIn.account, tokens: signIn.tokens, through: "id.example")
/// ```
///
/// The provider's endpoints come from its discovery document (OpenID Connect Discovery 1.0 §4, RFC 8414 as the
/// fallback), cached for ``Configuration/metadataLifetime``, and configure the client it wraps (``client()``): every
/// grant is that client's, and ``signIn(nonce:using:)`` makes any of them a validated sign-in. A revocation endpoint the discovery document does not
/// name is looked for in the provider's RFC 8414 authorization server metadata (django-oauth-toolkit names it only
/// there), unless ``Configuration/revocationEndpoint`` names one, which wins. Every ID token is validated before
/// anything is made of it (OpenID Connect Core §3.1.3.7: the signature with the provider's key for its `kid`, the
/// issuer, the audience, the times on the provider's clock, the nonce, `at_hash`), so the ``OpenIDSignIn/account`` of
/// a sign-in comes from claims the provider signed, never from claims taken on trust. As a ``TokenEndpoint`` it
/// validates the ID token of every refresh the same way and refuses one that names another issuer, subject or
/// audience (Core §12.2).
///
/// The signing keys are fetched from `jwks_uri` and cached; a token naming an unknown `kid` fetches them again
/// once (the provider may have rotated its keys), at most once per ``Configuration/minimumKeyRefetchInterval``, so
/// a stream of bad tokens cannot make it fetch in a loop.
///
/// - Important: Thread-safe. No token, code, nonce or key appears in any error or description it produces.
public final class OpenIDProvider: TokenEndpoint, TokenRevoker, Sendable, CustomStringConvertible {
    /// A discovery document and the client made from it.
    private struct Discovered: Sendable {
        var metadata: OpenIDProviderMetadata
        var client: OAuthClient
        var fetchedAt: ContinuousClock.Instant
        /// Whether the document was the RFC 8414 authorization server metadata (the OpenID one was missing): no
        /// other document then names a revocation endpoint it lacks.
        var isAuthorizationServerMetadata: Bool
    }

    /// The revocation endpoint the RFC 8414 metadata named (`nil`: none), for the discovery fetched at `fetchedAt`.
    private struct FallbackRevocation: Sendable {
        var client: OAuthClient?
        var fetchedAt: ContinuousClock.Instant
    }

    /// A key set and when it was fetched.
    private struct Keys: Sendable {
        var set: JSONWebKeySet
        var fetchedAt: ContinuousClock.Instant
    }

    /// A cached value, or the fetch every caller waits for.
    private enum Pending<Value: Sendable>: Sendable {
        case ready(Value)
        case fetching(Task<Value, any Error>)
    }

    private struct State: Sendable {
        var discovered: Discovered?
        var discovery: Task<Discovered, any Error>?
        var keys: Keys?
        var keyFetch: Task<Keys, any Error>?
        /// When the last fetch made for an unknown `kid` started, whatever its outcome: the rate limit counts from it.
        var lastKeyRefetch: ContinuousClock.Instant?
        /// How many times the key set was fetched.
        var keyFetches = 0
        /// The client that revokes where discovery names no revocation endpoint.
        var fallbackRevocation: FallbackRevocation?
    }

    /// The configuration the provider was created with.
    public let configuration: Configuration
    /// The provider's clock, from the `Date` of its answers.
    package let serverClock = ProviderClock()
    package let transport: OAuthTransport
    private let state = Lock(State())
    /// The `jti`s of the logout tokens accepted, so that none is accepted twice.
    package let logoutReplay = LogoutTokenReplayGuard()

    /// Creates a provider client. Nothing is fetched until a call needs the provider's metadata.
    ///
    /// - Parameter configuration: The issuer, the client and the rules.
    public init(configuration: Configuration) {
        self.configuration = configuration
        self.transport = OAuthTransport(
            requestTimeout: configuration.requestTimeout, clock: configuration.clock, serverClock: serverClock)
    }

    /// The issuer and the client ID.
    public var description: String {
        "OpenIDProvider(issuer: \(configuration.issuer.absoluteString), client_id: \(configuration.clientID))"
    }

    /// How many times the key set was fetched, for tests of the refetch rate limit.
    package var keySetFetchCount: Int { state.withLock { $0.keyFetches } }

    // MARK: - Discovery

    /// The provider's metadata, from its discovery document (fetched when the cached one is older than
    /// ``Configuration/metadataLifetime``).
    ///
    /// - Throws: As ``client()``.
    package func metadata() async throws -> OpenIDProviderMetadata {
        try await discovered().metadata
    }

    /// The OAuth client the provider wraps: the one its discovery document (fetched when the cached one is older
    /// than ``Configuration/metadataLifetime``) configures with the provider's endpoints, this configuration's
    /// client and rules, and DPoP when the provider takes it. Every grant is the client's; ``signIn(nonce:using:)``
    /// runs one and validates the ID token of its answer.
    ///
    /// - Returns: The client.
    /// - Throws: ``SessionError``: `invalidInput` for an unusable issuer URL, `providerMetadataRejected` for a
    ///   document that names another issuer or an endpoint that is not `https`, `providerOutage` (5xx, 429),
    ///   `networkUnavailable`, `timedOut`.
    public func client() async throws -> OAuthClient {
        try await discovered().client
    }

    private func discovered() async throws -> Discovered {
        let clock = configuration.clock
        let lifetime = configuration.metadataLifetime
        let pending = state.withLock { state -> Pending<Discovered> in
            if let discovered = state.discovered, discovered.fetchedAt.advanced(by: lifetime) > clock.now {
                return .ready(discovered)
            }
            if let running = state.discovery { return .fetching(running) }
            let task = Task { try await self.fetchMetadata() }
            state.discovery = task
            return .fetching(task)
        }
        let task: Task<Discovered, any Error>
        switch pending {
        case .ready(let discovered): return discovered
        case .fetching(let running): task = running
        }
        do {
            let discovered = try await task.value
            state.withLock { state in
                if state.discovered.map({ $0.fetchedAt < discovered.fetchedAt }) ?? true {
                    state.discovered = discovered
                }
                state.discovery = nil
            }
            return discovered
        } catch {
            state.withLock { $0.discovery = nil }
            throw error
        }
    }

    private func fetchMetadata() async throws -> Discovered {
        let issuer = configuration.issuer.absoluteString
        try EndpointPolicy.validate(configuration.issuer, role: "issuer")
        guard URLComponents(url: configuration.issuer, resolvingAgainstBaseURL: false)?.percentEncodedQuery == nil
        else { throw SessionError(.invalidInput, "the issuer must not have a query (OpenID Connect Discovery §2)") }
        var answer = try await get(Self.openIDConfigurationURL(issuer: issuer), what: "the discovery document")
        var isAuthorizationServerMetadata = false
        if answer.statusCode == 404, let fallback = Self.authorizationServerMetadataURL(issuer: issuer) {
            answer = try await get(fallback, what: "the authorization server metadata")
            isAuthorizationServerMetadata = true
        }
        try Self.requireSuccess(answer, what: "the discovery document")
        let metadata = try OpenIDProviderMetadata(json: Array(answer.body), expectedIssuer: issuer)
        // SessionKit signs proofs with ES256 only (DPoPKey); a provider that does not list it does not take them,
        // and is not sent `dpop_jkt` either (RFC 9449 §5.1, §10).
        let supportsDPoP = metadata.dpopSigningAlgorithms.contains("ES256")
        let client = OAuthClient(
            configuration: .init(
                tokenEndpoint: metadata.tokenEndpoint,
                revocationEndpoint: configuration.revocationEndpoint ?? metadata.revocationEndpoint,
                deviceAuthorizationEndpoint: configuration.deviceAuthorizationEndpoint
                    ?? metadata.deviceAuthorizationEndpoint,
                authorizationEndpoint: metadata.authorizationEndpoint,
                clientID: configuration.clientID,
                clientAuthentication: configuration.clientAuthentication,
                resources: configuration.resources,
                audience: configuration.audience,
                requestTimeout: configuration.requestTimeout,
                clock: configuration.clock,
                usesDPoP: configuration.usesDPoP ?? supportsDPoP,
                bindsAuthorizationCodeToDPoPKey: supportsDPoP),
            serverClock: serverClock)
        return Discovered(
            metadata: metadata, client: client, fetchedAt: configuration.clock.now,
            isAuthorizationServerMetadata: isAuthorizationServerMetadata)
    }

    /// The client that revokes: the discovered one when it has a revocation endpoint (the configuration's or the
    /// discovery document's); else one with the endpoint the provider's RFC 8414 metadata names, fetched when first
    /// needed and kept as long as the discovery document; else the discovered one, which has none.
    ///
    /// Fetched at revocation time rather than with discovery, so a sign-in never waits for it or fails with it, and
    /// a failure to fetch it (an outage) is the revocation's failure, never taken for "no endpoint".
    private func revocationClient() async throws -> OAuthClient {
        let discovered = try await discovered()
        guard discovered.client.configuration.revocationEndpoint == nil, !discovered.isAuthorizationServerMetadata
        else { return discovered.client }
        if let known = state.withLock({ $0.fallbackRevocation }), known.fetchedAt == discovered.fetchedAt {
            return known.client ?? discovered.client
        }
        var client: OAuthClient?
        if let endpoint = try await authorizationServerRevocationEndpoint() {
            var configuration = discovered.client.configuration
            configuration.revocationEndpoint = endpoint
            client = OAuthClient(configuration: configuration, serverClock: serverClock)
        }
        let found = FallbackRevocation(client: client, fetchedAt: discovered.fetchedAt)
        state.withLock { $0.fallbackRevocation = found }
        return client ?? discovered.client
    }

    /// The `revocation_endpoint` of the provider's RFC 8414 authorization server metadata, or `nil` when it has
    /// none or names none.
    ///
    /// The document is looked for where RFC 8414 §3.1 puts it (the well-known path inserted before the issuer's
    /// path), then, for a server mounted under a path that serves it only there, appended to the issuer as OpenID
    /// discovery is (django-oauth-toolkit under `/o/` answers at `/o/.well-known/oauth-authorization-server`).
    /// Either way its `issuer` must be exactly this provider's (RFC 8414 §3.3).
    private func authorizationServerRevocationEndpoint() async throws -> URL? {
        let issuer = configuration.issuer.absoluteString
        let what = "the authorization server metadata"
        var places = [Self.authorizationServerMetadataURL(issuer: issuer)].compactMap { $0 }
        let appended = Self.wellKnownURL(issuer: issuer, "oauth-authorization-server")
        if !places.contains(appended) { places.append(appended) }
        for place in places {
            let answer = try await get(place, what: what)
            if answer.statusCode == 404 { continue }
            try Self.requireSuccess(answer, what: what)
            return try OpenIDProviderMetadata.revocationEndpoint(
                inAuthorizationServerMetadata: Array(answer.body), expectedIssuer: issuer)
        }
        return nil
    }

    /// `/.well-known/openid-configuration` appended to the issuer's path (OpenID Connect Discovery 1.0 §4.1).
    package static func openIDConfigurationURL(issuer: String) -> URL {
        wellKnownURL(issuer: issuer, "openid-configuration")
    }

    /// `/.well-known/<name>` appended to the issuer's path.
    package static func wellKnownURL(issuer: String, _ name: String) -> URL {
        let base = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        // The issuer was validated as an absolute URL, so appending a path keeps it one.
        return URL(string: base + "/.well-known/" + name) ?? URL(fileURLWithPath: "/")
    }

    /// `/.well-known/oauth-authorization-server` inserted between the issuer's host and path (RFC 8414 §3.1).
    package static func authorizationServerMetadataURL(issuer: String) -> URL? {
        guard var components = URLComponents(string: issuer) else { return nil }
        let path = components.path == "/" ? "" : components.path
        components.path = "/.well-known/oauth-authorization-server" + path
        return components.url
    }

    // MARK: - Keys

    /// The key set, fetched again for `refetch` at most once per ``Configuration/minimumKeyRefetchInterval``.
    func keySet(refetch: Bool) async throws -> JSONWebKeySet? {
        let clock = configuration.clock
        let lifetime = configuration.keySetLifetime
        let minimum = configuration.minimumKeyRefetchInterval
        let pending = state.withLock { state -> Pending<Keys>? in
            if let running = state.keyFetch { return .fetching(running) }
            if let keys = state.keys, !refetch, keys.fetchedAt.advanced(by: lifetime) > clock.now {
                return .ready(keys)
            }
            // A refetch for an unknown kid within the rate limit is not made: the token is refused instead, so a
            // stream of tokens naming made-up kids costs the provider one fetch a minute.
            if refetch {
                if let last = state.lastKeyRefetch, last.advanced(by: minimum) > clock.now { return nil }
                state.lastKeyRefetch = clock.now
            }
            state.keyFetches += 1
            let task = Task { try await self.fetchKeys() }
            state.keyFetch = task
            return .fetching(task)
        }
        switch pending {
        case nil: return nil
        case .ready(let keys)?: return keys.set
        case .fetching(let task)?:
            do {
                let keys = try await task.value
                state.withLock { state in
                    if state.keys.map({ $0.fetchedAt <= keys.fetchedAt }) ?? true { state.keys = keys }
                    state.keyFetch = nil
                }
                return keys.set
            } catch {
                state.withLock { $0.keyFetch = nil }
                throw error
            }
        }
    }

    private func fetchKeys() async throws -> Keys {
        let url = try await metadata().keySetURL
        let answer = try await get(url, what: "the key set")
        try Self.requireSuccess(answer, what: "the key set")
        return Keys(set: try JSONWebKeySet(json: Array(answer.body)), fetchedAt: configuration.clock.now)
    }

    // MARK: - Validation

    /// Validates an ID token issued to this client (OpenID Connect Core §3.1.3.7).
    ///
    /// - Parameters:
    ///   - idToken: The ID token.
    ///   - nonce: The nonce the authorization request sent; `nil` where none was sent (a refresh, a device grant).
    ///   - accessToken: The access token issued with it, for `at_hash`.
    /// - Returns: The validated claims.
    /// - Throws: `SessionError(.idTokenRejected)` naming the failed check in ``SessionError/idTokenCheck``, or what
    ///   fetching the metadata and keys throws.
    public func validate(idToken: String, nonce: String?, accessToken: String?) async throws -> IDTokenClaims {
        let validator = IDTokenValidator(
            issuer: try await metadata().issuer, clientID: configuration.clientID, validation: configuration.validation)
        guard let cached = try await keySet(refetch: false) else { throw IDTokenValidator.unknownKey }
        let now = serverClock.now(wallNow: configuration.clock.wallNow)
        switch try validator.validate(idToken, keys: cached, nonce: nonce, accessToken: accessToken, now: now) {
        case .valid(let claims):
            return claims
        case .needsKeys:
            guard let fresh = try await keySet(refetch: true) else { throw IDTokenValidator.unknownKey }
            let now = serverClock.now(wallNow: configuration.clock.wallNow)
            guard
                case .valid(let claims) = try validator.validate(
                    idToken, keys: fresh, nonce: nonce, accessToken: accessToken, now: now)
            else { throw IDTokenValidator.unknownKey }
            return claims
        }
    }

    /// The validated sign-in that `tokens` carry: their ID token must be there and valid.
    package func verifiedSignIn(_ tokens: TokenSet, nonce: String?) async throws -> OpenIDSignIn {
        guard let idToken = tokens.idToken else {
            throw CompactJWS.refusal(.format, "is missing from the token response (was \"openid\" in the scope?)")
        }
        let claims = try await validate(idToken: idToken, nonce: nonce, accessToken: tokens.accessToken)
        return OpenIDSignIn(claims: claims, tokens: tokens)
    }

    // MARK: - TokenEndpoint and TokenRevoker

    /// Refreshes, validating the ID token of the answer if it has one.
    ///
    /// Without the account this cannot check that a refreshed ID token names the same user: a session calls
    /// ``refresh(using:for:proofKey:)``, which does.
    ///
    /// - Parameter refreshToken: The refresh token.
    /// - Returns: The new tokens.
    /// - Throws: As ``OAuthClient/refresh(using:)``, and `idTokenRejected`.
    public func refresh(using refreshToken: String) async throws -> TokenSet {
        let tokens = try await client().refresh(using: refreshToken)
        if let idToken = tokens.idToken {
            _ = try await validate(idToken: idToken, nonce: nil, accessToken: tokens.accessToken)
        }
        return tokens
    }

    /// Refreshes `account`'s tokens (with a DPoP proof of `proofKey` when they are bound to it); a refreshed ID
    /// token must be valid and name the same issuer and subject, and this client (OpenID Connect Core §12.2).
    ///
    /// - Parameters:
    ///   - refreshToken: The refresh token.
    ///   - account: Whose it is.
    ///   - proofKey: The DPoP key the tokens are bound to, if any.
    /// - Returns: The new tokens.
    /// - Throws: As ``OAuthClient/refresh(using:)``, and `idTokenRejected`: with check
    ///   ``IDTokenCheck/sameAccount`` for a token about someone else. A session ends as its grant was rejected.
    public func refresh(using refreshToken: String, for account: Account, proofKey: DPoPKey?) async throws -> TokenSet {
        let tokens = try await client().refresh(using: refreshToken, for: account, proofKey: proofKey)
        if let idToken = tokens.idToken {
            let claims = try await validate(idToken: idToken, nonce: nil, accessToken: tokens.accessToken)
            guard claims.issuer == account.issuer, claims.subject == account.subject else {
                throw CompactJWS.refusal(.sameAccount, "of the refresh names another account than the one refreshed")
            }
        }
        return tokens
    }

    /// Revokes a token at the provider's revocation endpoint (RFC 7009): ``Configuration/revocationEndpoint``,
    /// else the discovery document's, else the one the provider's RFC 8414 authorization server metadata names
    /// (read when first needed, and kept as long as the discovery document).
    ///
    /// - Parameters:
    ///   - token: The token.
    ///   - hint: Its type.
    /// - Throws: As ``OAuthClient/revoke(_:hint:)``; `noRevocationEndpoint` when none of the three names one
    ///   (nothing is sent); as ``client()`` when a document cannot be read.
    public func revoke(_ token: String, hint: TokenTypeHint) async throws {
        let client = try await revocationClient()
        guard client.configuration.revocationEndpoint != nil else {
            throw SessionError(
                .noRevocationEndpoint,
                "the provider names no revocation_endpoint in its discovery document or RFC 8414 metadata, "
                    + "and the configuration names none")
        }
        try await client.revoke(token, hint: hint)
    }

    // MARK: - Helpers

    private func get(_ url: URL, what: String) async throws -> OAuthTransport.Answer {
        var request = URLRequest(url: url)
        request.httpMethod = "GET"
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return try await transport.send(request, to: what)
    }

    private static func requireSuccess(_ answer: OAuthTransport.Answer, what: String) throws {
        switch answer.statusCode {
        case 200: return
        case 429, 500...599:
            throw SessionError(
                .providerOutage, "\(what) answered \(answer.statusCode)", statusCode: answer.statusCode,
                retryAfter: answer.retryAfter)
        default:
            throw SessionError(
                .providerMetadataRejected, "\(what) answered \(answer.statusCode)", statusCode: answer.statusCode)
        }
    }

    /// `tokens` with `refreshToken`, for a server that does not rotate refresh tokens.
    package static func keeping(_ refreshToken: String, in tokens: TokenSet) -> TokenSet {
        var tokens = tokens
        tokens.refreshToken = refreshToken
        return tokens
    }

    /// `scope` with `openid` in it.
    package static func openIDScope(_ scope: String?) -> String {
        guard let scope, !scope.isEmpty else { return "openid" }
        return scope.split(separator: " ").contains("openid") ? scope : "openid " + scope
    }

    /// A fresh nonce: 32 random bytes, base64url (OpenID Connect Core §15.5.2: enough entropy to defeat guessing).
    package static func makeNonce() throws -> String {
        do {
            return Base64URL.encode(try PlatformCrypto.randomBytes(count: 32))
        } catch {
            throw SessionError(.invalidInput, "no random bytes for a nonce: \(error)")
        }
    }
}
