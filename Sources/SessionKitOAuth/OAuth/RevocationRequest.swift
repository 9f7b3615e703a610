import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A token revocation request (RFC 7009 §2.1), and the reading of its answer (§2.2).
///
/// The body is `token`, `token_type_hint` when given, the client's identification (as ``TokenRequest``'s:
/// `client_id`, with `client_secret` for `client_secret_post`, neither for `client_secret_basic`, whose
/// `Authorization` header authenticates the request as RFC 7009 §2.1 requires of a confidential client), then any
/// additional parameters in name order, form-encoded as ``TokenRequest``'s is.
///
/// - Important: The description redacts the token and the client secret.
package struct RevocationRequest: Sendable, Equatable, CustomStringConvertible {
    /// Which kind of token is being revoked, to speed up the server's lookup (RFC 7009 §2.1): the one
    /// ``TokenRevoker`` takes.
    package typealias TokenTypeHint = SessionKitOAuth.TokenTypeHint

    /// What a revocation endpoint's answer means for the logout that sent it.
    package enum Outcome: Sendable, Equatable {
        /// Any 2xx: the token is revoked, or was unknown to the server (RFC 7009 §2.2: both are 200).
        case revoked
        /// 503 or 429: try again after the given wait (the `Retry-After`), if time allows (RFC 7009 §2.2.1).
        case retryable(after: Duration?)
        /// 400 `unsupported_token_type`: the server does not revoke this kind of token (RFC 7009 §2.2.1); revoking
        /// the other kind may still work.
        case unsupportedTokenType
        /// Any other answer: the server refused or failed; retrying will not help.
        case failed(SessionError)
    }

    /// The token to revoke.
    public let token: String
    /// The hint, if any.
    public let tokenTypeHint: TokenTypeHint?
    /// The client identifier.
    public let clientID: String
    /// How the client authenticates.
    public let authentication: ClientAuthentication
    /// Extra body parameters.
    public let additionalParameters: [String: String]

    /// Builds a revocation request.
    ///
    /// - Parameters:
    ///   - token: The token to revoke; non-empty.
    ///   - tokenTypeHint: Which kind of token it is, if known.
    ///   - clientID: The client identifier; non-empty.
    ///   - authentication: How the client authenticates; a secret must not be empty.
    ///   - additionalParameters: Extra parameters; none may be `token`, `token_type_hint` or `client_id`, nor
    ///     `client_secret` when `authentication` has a secret.
    /// - Throws: `SessionError(.invalidInput)` for an empty value or a reserved parameter name.
    public init(
        token: String,
        tokenTypeHint: TokenTypeHint?,
        clientID: String,
        authentication: ClientAuthentication = .none,
        additionalParameters: [String: String] = [:]
    ) throws {
        guard !token.isEmpty else { throw SessionError(.invalidInput, "the token to revoke is empty") }
        guard !clientID.isEmpty else { throw SessionError(.invalidInput, "the client ID is empty") }
        try authentication.validate()
        // An authenticating client cannot add a second method (RFC 6749 §2.3.1: one per request).
        let reserved: Set<String> = ["token", "token_type_hint", "client_id"]
        _ = try FormPostRequest.extraPairs(
            additionalParameters, reserved: reserved.union(authentication.reservedParameterNames))
        self.token = token
        self.tokenTypeHint = tokenTypeHint
        self.clientID = clientID
        self.authentication = authentication
        self.additionalParameters = additionalParameters
    }

    /// The form-encoded body.
    public var body: Data {
        Data(FormURLEncoding.encode(pairs).utf8)
    }

    /// The `POST` to send: the form body, `Content-Type: application/x-www-form-urlencoded`,
    /// `Accept: application/json` and `Cache-Control: no-store`.
    ///
    /// - Parameters:
    ///   - endpoint: The revocation endpoint: `https`, or `http` to a loopback host.
    ///   - now: The client's wall-clock time, for a client assertion's `iat` and `exp`.
    /// - Returns: The request.
    /// - Throws: `SessionError(.invalidInput)` when the endpoint is not acceptable.
    package func urlRequest(endpoint: URL, now: Date = Date()) throws -> URLRequest {
        var request = try FormPostRequest.make(endpoint: endpoint, pairs: pairs, role: "revocation endpoint")
        try authentication.authorize(&request, clientID: clientID, now: now)
        return request
    }

    /// The token and every spelling of the client secret: what an error quoting the server's answer must not
    /// repeat.
    package var secrets: [String] {
        [token] + authentication.secrets(clientID: clientID)
    }

    /// What a revocation endpoint's answer means.
    ///
    /// - Parameters:
    ///   - statusCode: The HTTP status.
    ///   - body: The response body.
    ///   - retryAfter: The parsed `Retry-After`, if any.
    /// - Returns: ``Outcome/revoked`` for 2xx; ``Outcome/retryable(after:)`` for 503 and 429;
    ///   ``Outcome/unsupportedTokenType`` for a 400 `unsupported_token_type`; otherwise ``Outcome/failed(_:)``
    ///   with the error ``OAuthErrorResponse/classify(statusCode:body:retryAfter:)`` gives.
    public static func classify(statusCode: Int, body: Data, retryAfter: Duration?) -> Outcome {
        switch statusCode {
        case 200..<300:
            return .revoked
        case 429, 503:
            return .retryable(after: retryAfter)
        case 400 where OAuthErrorResponse.parse(body)?.error == "unsupported_token_type":
            return .unsupportedTokenType
        default:
            return .failed(
                OAuthErrorResponse.classify(
                    statusCode: statusCode, body: body, retryAfter: retryAfter, endpoint: "the revocation endpoint"))
        }
    }

    /// The hint, client and authentication method, with the token and the secret redacted.
    public var description: String {
        "RevocationRequest(token: \(Redaction.redact(token)), token_type_hint: \(tokenTypeHint?.rawValue ?? "nil"), "
            + "client_id: \(clientID), client_auth: \(authentication.methodName))"
    }

    private var pairs: [(name: String, value: String)] {
        var pairs: [(name: String, value: String)] = [("token", token)]
        if let tokenTypeHint { pairs.append(("token_type_hint", tokenTypeHint.rawValue)) }
        pairs += authentication.bodyPairs(clientID: clientID)
        // The names were checked in init, so this cannot throw.
        pairs += (try? FormPostRequest.extraPairs(additionalParameters, reserved: [])) ?? []
        return pairs
    }
}

extension RevocationRequest: CustomReflectable {
    /// What `dump()`, `Mirror` and debuggers show: the token redacted, the authentication method by name.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "token": Redaction.redact(token),
                "tokenTypeHint": tokenTypeHint?.rawValue ?? "nil",
                "clientID": clientID,
                "authentication": authentication.description,
                "additionalParameters": additionalParameters.keys.sorted().map { name in
                    "\(name)=\(Redaction.redact(additionalParameters[name]))"
                },
            ],
            displayStyle: .struct
        )
    }
}
