import Foundation

/// Reads a token endpoint's successful answer (RFC 6749 §5.1) into a ``TokenSet``.
///
/// What is accepted, and why:
///
/// - The status must be 200 (RFC 6749 §5.1). Any other 2xx is `.malformedTokenResponse`; a non-2xx is handed to
///   ``OAuthErrorResponse/classify(statusCode:body:retryAfter:)`` and its error thrown.
/// - The body must be one JSON object of at most 1 MiB, without duplicate members. Unknown members are ignored
///   (RFC 6749 §5.1).
/// - `access_token` must be a non-empty string of visible ASCII (`!` to `~`). RFC 6750 §2.1 allows fewer
///   characters; SessionKit accepts any visible ASCII because some servers issue such tokens, but refuses
///   spaces, control characters and non-ASCII, which could split or corrupt the `Authorization` header.
/// - `token_type` is required (RFC 6749 §5.1) and must be `Bearer` in any letter case, stored as `Bearer`; or, when
///   the request carried a DPoP proof, `DPoP` (RFC 9449 §5), stored as `DPoP` and bound to the proof's key. A
///   `Bearer` answer to a DPoP request is refused: the client asked for bound tokens and would otherwise send a
///   token it meant to bind as a bearer token. Another type (`MAC`) is refused.
/// - `expires_in`: absent or `null` means an unknown lifetime (`nil`: the token is used until a 401). A whole
///   number of seconds, as a JSON number or as a string of digits (`"3600"`, which Azure AD and others send).
///   `0` is read as an unknown lifetime too: servers that send it mean "not stated", and treating the token as
///   already expired would make every request refresh first. Negative, fractional, non-digit strings and other
///   types are refused. A lifetime over ten years is clamped to ten years: such a server means "does not
///   expire", and refusing the response would fail a sign-in that worked.
/// - `refresh_token` and `id_token`: optional strings; `null` or `""` mean absent (RFC 6749 §6 then keeps the
///   previous refresh token).
/// - `scope`: an optional string, or an array of strings (joined with spaces) as a few servers send; empty means
///   absent.
///
/// - Important: Error messages name the member that is wrong, never its value.
package enum TokenResponse {
    /// The token set a token endpoint's answer carries.
    ///
    /// - Parameters:
    ///   - data: The response body.
    ///   - statusCode: The HTTP status.
    ///   - receivedAt: The monotonic instant the response arrived: expiry is measured from here.
    ///   - receivedAtWall: The wall-clock time the response arrived.
    ///   - retryAfter: The response's parsed `Retry-After`, used when the status is a failure.
    ///   - proofKey: The DPoP key the request sent a proof of, if any: the tokens must come bound to it.
    /// - Returns: The token set.
    /// - Throws: `SessionError(.malformedTokenResponse)` for a 200 that breaks the rules above; the classified
    ///   error for a failure status.
    public static func parse(
        data: Data,
        statusCode: Int,
        receivedAt: ContinuousClock.Instant,
        receivedAtWall: Date,
        retryAfter: Duration? = nil,
        proofKey: DPoPKey? = nil
    ) throws -> TokenSet {
        guard statusCode == 200 else {
            if (200..<300).contains(statusCode) {
                throw SessionError(
                    .malformedTokenResponse, "the token endpoint answered \(statusCode); a token response is a 200",
                    statusCode: statusCode)
            }
            throw OAuthErrorResponse.classify(statusCode: statusCode, body: data, retryAfter: retryAfter)
        }
        let members = try JSONParser.object(
            from: data, code: .malformedTokenResponse, context: "the token response", statusCode: statusCode)
        return try parse(
            members: members, statusCode: statusCode, receivedAt: receivedAt, receivedAtWall: receivedAtWall,
            proofKey: proofKey)
    }

    /// The token set in an already parsed token response object.
    ///
    /// - Parameters:
    ///   - members: The JSON object's members.
    ///   - statusCode: The HTTP status, for errors.
    ///   - receivedAt: The monotonic instant the response arrived.
    ///   - receivedAtWall: The wall-clock time the response arrived.
    ///   - proofKey: The DPoP key the request sent a proof of, if any.
    /// - Returns: The token set.
    /// - Throws: `SessionError(.malformedTokenResponse)`.
    package static func parse(
        members: [String: JSONValue],
        statusCode: Int?,
        receivedAt: ContinuousClock.Instant,
        receivedAtWall: Date,
        proofKey: DPoPKey? = nil
    ) throws(SessionError) -> TokenSet {
        let reader = JSONObjectReader(
            members: members, code: .malformedTokenResponse, context: "the token response", statusCode: statusCode)

        let accessToken = try reader.requiredString("access_token")
        guard accessToken.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw reader.error("\"access_token\" has characters other than visible ASCII")
        }

        guard let tokenType = try reader.string("token_type") else {
            throw reader.error("\"token_type\" is missing (RFC 6749 §5.1)")
        }
        if proofKey != nil, tokenType.lowercased() == "bearer" {
            throw reader.error(
                "token type Bearer answers a DPoP request: the server did not bind the tokens (RFC 9449 §5)")
        }
        guard tokenType.lowercased() == "bearer" || (proofKey != nil && tokenType.lowercased() == "dpop") else {
            // Only a registered type is named: a token response is credential material, and a server that puts a
            // token in the wrong field must not have it copied into an error message (a fuzz input found exactly
            // that).
            let registered = ["dpop": "DPoP", "mac": "MAC", "n_a": "N_A", "pop": "PoP"]
            let shown = registered[tokenType.lowercased()].map { "\"\($0)\"" } ?? "of an unregistered kind"
            throw reader.error("token type \(shown) is not Bearer; SessionKit sends only bearer tokens")
        }

        let lifetime: Duration?
        switch try reader.seconds("expires_in", saturation: OAuthLimits.maximumLifetimeSeconds) {
        case nil, 0?: lifetime = nil
        case let seconds?: lifetime = .seconds(seconds)
        }

        let refreshToken = try reader.string("refresh_token").flatMap { $0.isEmpty ? nil : $0 }
        let idToken = try reader.string("id_token").flatMap { $0.isEmpty ? nil : $0 }

        let scope: String?
        switch members["scope"] {
        case nil, .null?:
            scope = nil
        case .string(let value)?:
            scope = value.isEmpty ? nil : value
        case .array(let elements)?:
            var tokens: [String] = []
            for element in elements {
                guard case .string(let token) = element else {
                    throw reader.error("\"scope\" is an array with an element that is not a string")
                }
                tokens.append(token)
            }
            let joined = tokens.filter { !$0.isEmpty }.joined(separator: " ")
            scope = joined.isEmpty ? nil : joined
        case let other?:
            throw reader.error("\"scope\" is \(JSONObjectReader.typeName(of: other)), not a string")
        }

        return TokenSet(
            accessToken: accessToken,
            refreshToken: refreshToken,
            idToken: idToken,
            scope: scope,
            tokenType: proofKey == nil ? "Bearer" : "DPoP",
            proofKey: proofKey,
            lifetime: lifetime,
            receivedAt: receivedAt,
            receivedAtWall: receivedAtWall
        )
    }
}
