import Foundation

/// Reads the redirect that ends the authorization step of an authorization code grant (RFC 6749 §4.1.2).
package enum AuthorizationResponse {
    /// The authorization code in `callbackURL`, checked against `expectedState` and `expectedIssuer` as
    /// ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)`` describes.
    package static func parse(
        callbackURL: URL,
        expectedState: String,
        expectedIssuer: String? = nil
    ) throws -> String {
        guard !expectedState.isEmpty else {
            throw SessionError(.invalidInput, "the expected state is empty; every request must carry a state")
        }
        let query = URLComponents(url: callbackURL, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? ""
        guard let pairs = FormURLEncoding.decode(query) else {
            throw SessionError(.malformedResponse, "the authorization callback's query is not validly encoded")
        }
        var parameters: [String: String] = [:]
        for (name, value) in pairs where ["state", "code", "error", "error_description", "iss"].contains(name) {
            guard parameters.updateValue(value, forKey: name) == nil else {
                throw SessionError(
                    .malformedResponse, "the authorization callback repeats \"\(name)\" (RFC 6749 §3.1)")
            }
        }

        guard let state = parameters["state"] else {
            throw SessionError(.invalidInput, "the authorization callback has no state: it may be forged (CSRF)")
        }
        guard constantTimeEqual(state, expectedState) else {
            throw SessionError(
                .invalidInput, "the authorization callback's state does not match the request: it may be forged (CSRF)")
        }
        if let expectedIssuer, let issuer = parameters["iss"], issuer != expectedIssuer {
            throw SessionError(
                .invalidInput, "the authorization callback comes from another issuer (RFC 9207 mix-up defence)")
        }
        if let error = parameters["error"] {
            guard let response = OAuthErrorResponse(error: error, errorDescription: parameters["error_description"])
            else {
                throw SessionError(.authorizationFailed, "the authorization server answered with an invalid error code")
            }
            throw response.sessionError("the authorization server refused", statusCode: nil, retryAfter: nil)
        }
        guard let code = parameters["code"], !code.isEmpty else {
            throw SessionError(.malformedResponse, "the authorization callback has neither a code nor an error")
        }
        return code
    }

    private static func constantTimeEqual(_ lhs: String, _ rhs: String) -> Bool {
        let left = Array(lhs.utf8)
        let right = Array(rhs.utf8)
        var difference = UInt8(truncatingIfNeeded: left.count ^ right.count) | (left.count == right.count ? 0 : 1)
        for index in 0..<min(left.count, right.count) { difference |= left[index] ^ right[index] }
        return difference == 0
    }
}

extension AuthorizationRequest {
    /// The authorization code in a redirect callback, after checking that the callback answers this request.
    ///
    /// The checks run in this order, so an attacker's callback never gets past the first:
    /// 1. The query must be well-formed, with `state`, `code`, `error` and `iss` each at most once (RFC 6749 §3.1).
    /// 2. `state` must equal this request's ``state`` (compared in constant time). A missing or different state is a
    ///    forged or stale callback (CSRF, RFC 6749 §10.12): `.invalidInput`.
    /// 3. When `expectedIssuer` is given and the callback has `iss`, they must be equal (RFC 9207, mix-up defence):
    ///    `.invalidInput`. A callback without `iss` is accepted, since not every server sends it.
    /// 4. `error=access_denied` is `.accessDenied`; `server_error` and `temporarily_unavailable` are
    ///    `.providerOutage`; any other error is `.authorizationFailed`. The code is in ``SessionError/oauthError``
    ///    and a cleaned `error_description` in the message.
    /// 5. Otherwise `code` must be present and non-empty: `.malformedResponse` if not.
    ///
    /// Parameters are read from the query only (the default `response_mode`), decoded as
    /// `application/x-www-form-urlencoded` (`+` is a space).
    ///
    /// - Parameters:
    ///   - callbackURL: The URL the browser was redirected to.
    ///   - expectedIssuer: The authorization server's issuer identifier, to check `iss` against, or `nil`.
    /// - Returns: The authorization code. It is a credential: do not log it.
    /// - Throws: `SessionError` as listed above; messages never contain the code or the state.
    public func authorizationCode(from callbackURL: URL, expectedIssuer: String? = nil) throws -> String {
        try AuthorizationResponse.parse(callbackURL: callbackURL, expectedState: state, expectedIssuer: expectedIssuer)
    }
}
