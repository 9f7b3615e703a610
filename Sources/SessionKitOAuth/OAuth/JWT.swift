/// Reads the claims of a JSON Web Token (RFC 7519) — WITHOUT VERIFYING ITS SIGNATURE.
///
/// - Important: **Nothing here checks a signature, an audience, an expiry or a nonce.** Anyone can write a JWT
///   with any claims. Use these functions only to read what an ID token says about a user you already
///   authenticated: the ID token must come straight from the token endpoint over TLS, in the same response as the
///   access token (OpenID Connect Core §3.1.3.7 lets a client skip signature checks in exactly that case). Never
///   use them to authorize anything, and never on a token that arrived any other way.
///
/// A JWT here is a compact JWS: three base64url segments separated by dots (RFC 7515 §7.1), padded or not. The
/// header must be a JSON object; the payload must be a JSON object; the signature is not read. An encrypted
/// token (JWE, five segments) is refused. Every refusal is `SessionError(.malformedTokenResponse)`, since an ID
/// token arrives in a token response, and no message contains any part of the token.
package enum JWT {
    /// The claims in a JWT's payload.
    ///
    /// - Parameter idToken: A compact JWS, at most 1 MiB.
    /// - Returns: The payload's members.
    /// - Throws: `SessionError(.malformedTokenResponse)` when the token is not a readable JWT.
    package static func claims(of idToken: String) throws -> [String: JSONValue] {
        guard idToken.utf8.count <= OAuthLimits.maximumBodyBytes else {
            throw malformed("is over the \(OAuthLimits.maximumBodyBytes)-byte limit")
        }
        let segments = idToken.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else {
            throw malformed(
                segments.count == 5
                    ? "is encrypted (JWE), which SessionKit does not read" : "does not have three dot-separated parts")
        }
        guard let headerBytes = Base64URL.decode(Substring(segments[0])),
            let payloadBytes = Base64URL.decode(Substring(segments[1]))
        else { throw malformed("has a part that is not base64url") }
        guard case .object? = try? JSONParser.parse(headerBytes) else {
            throw malformed("has a header that is not a JSON object")
        }
        let payload: JSONValue
        do {
            payload = try JSONParser.parse(payloadBytes)
        } catch {
            throw malformed("has a payload that is not valid JSON: \(error.reason) at byte \(error.offset)")
        }
        guard case .object(let claims) = payload else { throw malformed("has a payload that is not a JSON object") }
        return claims
    }

    /// The `sid` claim of an ID token (OpenID Connect Front-Channel and Back-Channel Logout 1.0): the user's session
    /// at the provider, which a logout token may name; `nil` when the token is unreadable or has no `sid` string of 1
    /// to 255 bytes.
    ///
    /// - Parameter idToken: A compact JWS, from the token endpoint.
    /// - Returns: The session identifier, or `nil`.
    package static func sessionID(of idToken: String) -> String? {
        guard case .string(let sid)? = try? claims(of: idToken)["sid"], !sid.isEmpty, sid.utf8.count <= 255 else {
            return nil
        }
        return sid
    }

    /// The `sub` claim: the user's stable identifier at the issuer.
    ///
    /// - Parameter idToken: A compact JWS.
    /// - Returns: The subject.
    /// - Throws: `SessionError(.malformedTokenResponse)` when the token is unreadable or `sub` is missing, empty
    ///   or not a string.
    package static func subject(of idToken: String) throws -> String {
        try requiredString("sub", in: claims(of: idToken))
    }

    /// The `iss` claim: the issuer that wrote the token.
    ///
    /// - Parameter idToken: A compact JWS.
    /// - Returns: The issuer.
    /// - Throws: `SessionError(.malformedTokenResponse)` when the token is unreadable or `iss` is missing, empty
    ///   or not a string.
    package static func issuer(of idToken: String) throws -> String {
        try requiredString("iss", in: claims(of: idToken))
    }

    /// A name to show for the user: `name`, else `preferred_username`, else `email`, cleaned of control characters.
    ///
    /// - Parameter idToken: A compact JWS.
    /// - Returns: The first non-empty one of those claims that is a string, or `nil`.
    /// - Throws: `SessionError(.malformedTokenResponse)` when the token is unreadable.
    package static func displayName(of idToken: String) throws -> String? {
        displayName(in: try claims(of: idToken))
    }

    /// The account an ID token names: its issuer, subject and display name.
    ///
    /// - Parameter idToken: A compact JWS from the token endpoint (see the warning on ``JWT``).
    /// - Returns: The account.
    /// - Throws: `SessionError(.malformedTokenResponse)` when the token is unreadable or lacks `iss` or `sub`.
    package static func account(from idToken: String) throws -> Account {
        let claims = try claims(of: idToken)
        return Account(
            issuer: try requiredString("iss", in: claims),
            subject: try requiredString("sub", in: claims),
            displayName: displayName(in: claims)
        )
    }

    package static func displayName(in claims: [String: JSONValue]) -> String? {
        for name in ["name", "preferred_username", "email"] {
            if let value = claims[name]?.stringValue {
                let cleaned = ServerText.sanitized(value, limit: 128)
                if !cleaned.isEmpty { return cleaned }
            }
        }
        return nil
    }

    private static func requiredString(_ name: String, in claims: [String: JSONValue]) throws -> String {
        guard let value = claims[name]?.stringValue, !value.isEmpty else {
            throw malformed("has no \"\(name)\" string claim")
        }
        return value
    }

    private static func malformed(_ problem: String) -> SessionError {
        SessionError(.malformedTokenResponse, "the ID token \(problem)")
    }
}
