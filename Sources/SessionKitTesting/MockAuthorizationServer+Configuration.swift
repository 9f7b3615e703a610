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
        /// The clock that decides when access tokens, device codes and authorization codes expire.
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
        ///   - clock: The expiry clock; the system's by default.
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
            clock: any SessionClock = SystemClock(),
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
            self.clock = clock
            self.server = server
        }
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
        /// `/api/me` and any route added with ``MockAuthorizationServer/protectedRoute(_:_:_:)``.
        case resource
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

    /// A way for the next requests to an endpoint to go wrong, injected with
    /// ``MockAuthorizationServer/failNext(_:with:times:)``.
    ///
    /// Except for ``processThenDrop``, a failure replaces processing: the server changes no state (no rotation,
    /// no revocation) for that request.
    public enum Failure: Sendable, Hashable {
        /// 503 with an HTML body, and `Retry-After` in whole seconds when given.
        case serviceUnavailable(retryAfter: Duration?)
        /// 429 with a JSON body, and `Retry-After` in whole seconds when given.
        case tooManyRequests(retryAfter: Duration?)
        /// 500 with an HTML body.
        case internalServerError
        /// An OAuth error response (RFC 6749 §5.2) with this error code and status, such as `invalid_grant`.
        case oauthError(String, status: Int)
        /// A 200 whose body is not a valid token response.
        case malformedBody(MalformedBody)
        /// A broken exchange: the connection closes, the body is cut, or the bytes are not HTTP.
        case fault(LocalServer.Fault)
        /// Processes the request as usual (a refresh rotates, a code is used up), then closes the connection
        /// without answering: what a client sees when it is killed, or loses the network, mid-request.
        case processThenDrop
        /// Never answers; the request is held until the client goes away or the server stops.
        case neverAnswer

        /// `invalid_grant`, status 400.
        public static var invalidGrant: Failure { .oauthError("invalid_grant", status: 400) }
    }

    /// A 200 token response that a client must refuse.
    public enum MalformedBody: String, Sendable, Hashable, CaseIterable {
        /// Plain text.
        case notJSON
        /// No body at all.
        case empty
        /// JSON cut in the middle.
        case truncatedJSON
        /// A JSON array instead of an object.
        case array
        /// An object without `access_token`.
        case missingAccessToken
        /// `access_token` is a number.
        case accessTokenNotString
        /// `expires_in` is a word.
        case expiresInNotNumber
        /// An object without `token_type`.
        case missingTokenType
        /// `token_type` is not Bearer.
        case unsupportedTokenType
        /// `access_token` is an empty string.
        case emptyAccessToken

        var body: String {
            switch self {
            case .notJSON: "access_token=at-x&token_type=Bearer"
            case .empty: ""
            case .truncatedJSON: #"{"access_token":"at-x","token_type":"Bea"#
            case .array: #"[{"access_token":"at-x","token_type":"Bearer"}]"#
            case .missingAccessToken: #"{"token_type":"Bearer","expires_in":3600,"refresh_token":"rt-x"}"#
            case .accessTokenNotString: #"{"access_token":12345,"token_type":"Bearer","refresh_token":"rt-x"}"#
            case .expiresInNotNumber:
                #"{"access_token":"at-x","token_type":"Bearer","expires_in":"soon","refresh_token":"rt-x"}"#
            case .missingTokenType: #"{"access_token":"at-x","expires_in":3600,"refresh_token":"rt-x"}"#
            case .unsupportedTokenType: #"{"access_token":"at-x","token_type":"MAC","refresh_token":"rt-x"}"#
            case .emptyAccessToken: #"{"access_token":"","token_type":"Bearer","refresh_token":"rt-x"}"#
            }
        }
    }
}
