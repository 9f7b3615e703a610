import SessionKit

extension MockAuthorizationServer {
    /// How a ``MockAuthorizationServer`` issues and checks tokens.
    public struct Configuration: Sendable {
        /// The only client the server knows; requests with another `client_id` get `invalid_client`.
        public var clientID: String
        /// The lifetime of access tokens (`expires_in`); `nil` issues tokens without a stated lifetime that never
        /// expire.
        public var accessTokenLifetime: Duration?
        /// Whether a refresh issues a new refresh token and retires the presented one (RFC 9700 §4.14.2). When off,
        /// the refresh token stays valid and refresh responses carry none.
        public var rotatesRefreshTokens: Bool
        /// Whether grants come with a refresh token at all.
        public var issuesRefreshTokens: Bool
        /// Whether the revocation endpoint revokes access tokens; when off it answers `unsupported_token_type`
        /// for them (RFC 7009 §2.2.1).
        public var revokesAccessTokens: Bool
        /// How long a device code stays valid (`expires_in` of the device authorization response).
        public var deviceCodeLifetime: Duration
        /// The polling interval the device authorization response asks for.
        public var devicePollingInterval: Duration
        /// How long an authorization code stays valid.
        public var authorizationCodeLifetime: Duration
        /// The `Cache-Control` of token responses; RFC 6749 §5.1 requires `no-store`, and a test can set a
        /// cacheable value to check that a client does not cache anyway.
        public var tokenResponseCacheControl: String
        /// Whether the server is an OpenID Connect provider too: a discovery document at
        /// ``MockAuthorizationServer/openIDConfigurationURL``, a key set with one ES256 key, an ES256 ID token in
        /// every token response whose scope has `openid`, a UserInfo endpoint and an end-session endpoint (see
        /// ``MockAuthorizationServer``). Off by default: the server is then a plain OAuth 2.0 server, which issues
        /// no ID token and answers 404 for discovery.
        public var openID: Bool
        /// With ``openID`` on, which of the provider's metadata documents name its revocation endpoint
        /// (``MockAuthorizationServer/revocationEndpoint``, which answers whatever they say).
        public var revocationEndpointListing: RevocationEndpointListing
        /// Whether the server binds tokens to DPoP keys (RFC 9449). The token endpoint then checks a request's `DPoP`
        /// proof and, when it is valid, issues tokens bound to its key (`token_type` `DPoP`); a bound refresh token
        /// is refreshed only with a proof of the same key, and a code whose authorization request carried `dpop_jkt`
        /// only with a proof of that key (RFC 9449 §10). The resources accept a bound access token only as
        /// `Authorization: DPoP` with a valid proof. Requests without a proof get bearer tokens and use them as
        /// before. With ``openID`` on, both metadata documents list ES256 in `dpop_signing_alg_values_supported`.
        /// Off by default: the server then ignores `DPoP` headers and `dpop_jkt`, and issues bearer tokens only.
        public var dpop: Bool
        /// With ``dpop`` on, whether every proof must carry the server's nonce (RFC 9449 §8, §9): one without it, or
        /// with an old one, is answered `use_dpop_nonce` with the nonce in a `DPoP-Nonce` header. The nonce stays
        /// the same until ``MockAuthorizationServer/rotateDPoPNonce()``. Off by default.
        public var requiresDPoPNonce: Bool
        /// The clock that decides when access tokens, device codes and authorization codes expire, and whose wall
        /// time a DPoP proof's `iat` must be within 60 seconds of.
        public var clock: any SessionClock
        /// The underlying server's limits and timeouts.
        public var server: LocalServer.Configuration

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - clientID: The client the server knows; `sessionkit-tests` by default.
        ///   - accessTokenLifetime: Access token lifetime; one hour by default.
        ///   - rotatesRefreshTokens: Whether refresh tokens rotate; on by default.
        ///   - issuesRefreshTokens: Whether grants carry a refresh token; on by default.
        ///   - revokesAccessTokens: Whether access tokens can be revoked; on by default.
        ///   - deviceCodeLifetime: Device code lifetime; ten minutes by default.
        ///   - devicePollingInterval: Device polling interval; five seconds by default.
        ///   - authorizationCodeLifetime: Authorization code lifetime; one minute by default.
        ///   - tokenResponseCacheControl: `Cache-Control` of token responses; `no-store` by default.
        ///   - openID: Whether the server is an OpenID Connect provider too; off by default.
        ///   - revocationEndpointListing: Which metadata documents name the revocation endpoint; both by default.
        ///   - dpop: Whether the server binds tokens to DPoP keys; off by default.
        ///   - requiresDPoPNonce: Whether DPoP proofs must carry the server's nonce; off by default.
        ///   - clock: The expiry clock; `nil` (the default) reads the system's clocks.
        ///   - server: The underlying server's configuration.
        public init(
            clientID: String = "sessionkit-tests",
            accessTokenLifetime: Duration? = .seconds(3600),
            rotatesRefreshTokens: Bool = true,
            issuesRefreshTokens: Bool = true,
            revokesAccessTokens: Bool = true,
            deviceCodeLifetime: Duration = .seconds(600),
            devicePollingInterval: Duration = .seconds(5),
            authorizationCodeLifetime: Duration = .seconds(60),
            tokenResponseCacheControl: String = "no-store",
            openID: Bool = false,
            revocationEndpointListing: RevocationEndpointListing = .discoveryAndAuthorizationServerMetadata,
            dpop: Bool = false,
            requiresDPoPNonce: Bool = false,
            clock: (any SessionClock)? = nil,
            server: LocalServer.Configuration = .init()
        ) {
            self.clientID = clientID
            self.accessTokenLifetime = accessTokenLifetime
            self.rotatesRefreshTokens = rotatesRefreshTokens
            self.issuesRefreshTokens = issuesRefreshTokens
            self.revokesAccessTokens = revokesAccessTokens
            self.deviceCodeLifetime = deviceCodeLifetime
            self.devicePollingInterval = devicePollingInterval
            self.authorizationCodeLifetime = authorizationCodeLifetime
            self.tokenResponseCacheControl = tokenResponseCacheControl
            self.openID = openID
            self.revocationEndpointListing = revocationEndpointListing
            self.dpop = dpop
            self.requiresDPoPNonce = requiresDPoPNonce
            self.clock = clock ?? SystemClock()
            self.server = server
        }
    }

    /// Which of an OpenID provider's metadata documents name its revocation endpoint (RFC 7009): the discovery
    /// document (``MockAuthorizationServer/openIDConfigurationURL``) and the RFC 8414 authorization server metadata
    /// (``MockAuthorizationServer/authorizationServerMetadataURL``).
    public enum RevocationEndpointListing: Sendable, Hashable, CaseIterable {
        /// Both, as most providers do.
        case discoveryAndAuthorizationServerMetadata
        /// Only the RFC 8414 authorization server metadata, as django-oauth-toolkit does.
        case authorizationServerMetadataOnly
        /// Neither: the provider publishes no revocation endpoint.
        case nowhere
    }

    /// One of the server's endpoints, to aim a delay, a gate or a failure at.
    public enum Endpoint: Sendable, Hashable, CaseIterable {
        /// `/token`.
        case token
        /// `/revoke`.
        case revocation
        /// `/device`.
        case deviceAuthorization
        /// `/authorize`.
        case authorization
        /// `/api/me`, `/userinfo` and any route added with ``MockAuthorizationServer/protectedRoute(_:_:_:)``.
        case resource
        /// `/.well-known/openid-configuration`, the OpenID Connect discovery document.
        case openIDConfiguration
        /// `/.well-known/oauth-authorization-server`, the RFC 8414 authorization server metadata.
        case authorizationServerMetadata
        /// `/jwks`, the key set the ID tokens are signed with.
        case keySet
        /// `/logout`, the end-session endpoint.
        case endSession
    }

    /// A token endpoint grant type, for counting requests.
    public enum Grant: String, Sendable, Hashable, CaseIterable {
        /// `authorization_code`.
        case authorizationCode = "authorization_code"
        /// `refresh_token`.
        case refreshToken = "refresh_token"
        /// `password`.
        case password = "password"
        /// `urn:ietf:params:oauth:grant-type:device_code`.
        case deviceCode = "urn:ietf:params:oauth:grant-type:device_code"
    }
}
