import Foundation

/// A pending authorization request kept between the redirect and the callback by a server whose callback may reach
/// another instance than the one that made the request: every field, the PKCE verifier included.
///
/// ```swift
/// // GET /login, on any instance:
/// let request = try await provider.authorizationRequest(redirectURI: redirectURI, scope: "openid profile")
/// try pending.save(JSONEncoder().encode(request), for: request.state)  // server-side, shared by the instances
/// // GET /callback, on any instance:
/// let request = try JSONDecoder().decode(AuthorizationRequest.self, from: pending.take(for: state))
/// let code = try request.authorizationCode(from: callbackURL)
/// ```
///
/// - Important: The encoded form holds the PKCE verifier (RFC 7636 §4.1), which is what makes a stolen code
///   useless: keep it on the server (never in a cookie, a URL or a log), use it once and delete it. A request made
///   with a DPoP key (``OAuthClient/Configuration/usesDPoP``) cannot be encoded, because its private key must not
///   leave the process: encoding it throws `EncodingError.invalidValue`.
extension AuthorizationRequest: Codable {
    private enum CodingKeys: String, CodingKey {
        case authorizationEndpoint = "authorization_endpoint"
        case clientID = "client_id"
        case redirectURI = "redirect_uri"
        case scope, state, nonce
        case codeVerifier = "code_verifier"
        case resources, audience
        case additionalParameters = "additional_parameters"
        case url
    }

    /// Decodes a request that ``encode(to:)`` wrote.
    ///
    /// - Parameter decoder: The decoder.
    /// - Throws: `DecodingError` for a missing field; ``SessionError`` (`invalidInput`) for a verifier RFC 7636
    ///   §4.1 does not allow.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        authorizationEndpoint = try container.decode(URL.self, forKey: .authorizationEndpoint)
        clientID = try container.decode(String.self, forKey: .clientID)
        redirectURI = try container.decode(String.self, forKey: .redirectURI)
        scope = try container.decodeIfPresent(String.self, forKey: .scope)
        state = try container.decode(String.self, forKey: .state)
        nonce = try container.decodeIfPresent(String.self, forKey: .nonce)
        pkce = try PKCE(verifier: container.decode(String.self, forKey: .codeVerifier))
        proofKey = nil
        resources = try container.decode([String].self, forKey: .resources)
        audience = try container.decodeIfPresent(String.self, forKey: .audience)
        additionalParameters = try container.decode([String: String].self, forKey: .additionalParameters)
        url = try container.decode(URL.self, forKey: .url)
    }

    /// Encodes the request, its PKCE verifier included.
    ///
    /// - Parameter encoder: The encoder.
    /// - Throws: `EncodingError.invalidValue` for a request made with a DPoP key.
    public func encode(to encoder: any Encoder) throws {
        guard proofKey == nil else {
            throw EncodingError.invalidValue(
                "a DPoP sign-in",
                .init(
                    codingPath: encoder.codingPath,
                    debugDescription: "a request made with a DPoP key cannot be encoded: the key stays in the process"))
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(authorizationEndpoint, forKey: .authorizationEndpoint)
        try container.encode(clientID, forKey: .clientID)
        try container.encode(redirectURI, forKey: .redirectURI)
        try container.encodeIfPresent(scope, forKey: .scope)
        try container.encode(state, forKey: .state)
        try container.encodeIfPresent(nonce, forKey: .nonce)
        try container.encode(pkce.verifier, forKey: .codeVerifier)
        try container.encode(resources, forKey: .resources)
        try container.encodeIfPresent(audience, forKey: .audience)
        try container.encode(additionalParameters, forKey: .additionalParameters)
        try container.encode(url, forKey: .url)
    }
}
