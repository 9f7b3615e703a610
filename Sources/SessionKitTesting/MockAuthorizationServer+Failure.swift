extension MockAuthorizationServer {
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
        /// This status with no body at all: what some servers answer a refresh token they revoked (400).
        case bareStatus(Int)
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
