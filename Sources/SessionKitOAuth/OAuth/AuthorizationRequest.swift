import Foundation

/// The URL that starts an authorization code grant with PKCE (RFC 6749 §4.1.1, RFC 7636 §4.3).
///
/// Open ``url`` in a browser; when the browser comes back to the redirect URI, pass the callback URL (and the
/// authorization server's issuer, if you know it) to ``authorizationCode(from:expectedIssuer:)``, which checks
/// ``state``, then exchange the code with ``OAuthClient/exchange(code:for:)``, which sends the PKCE verifier this
/// request keeps and the same ``redirectURI``.
///
/// With DPoP (``OAuthClient/Configuration/usesDPoP``) the request is made with the sign-in's DPoP key: the code
/// exchange signs its proof with that key, and the tokens are bound to it. When the server supports it, the URL
/// carries the key's thumbprint as `dpop_jkt` (RFC 9449 §10), which binds the code to the key: a code taken from the
/// redirect is useless without it.
public struct AuthorizationRequest: Sendable, Equatable {
    /// The names SessionKit sets itself; ``OAuthClient/authorizationRequest(redirectURI:scope:additionalParameters:)``
    /// refuses them as additional parameters so a caller cannot weaken PKCE or the state check by accident.
    /// `resource` and `audience` are among them: set them with ``OAuthClient/Configuration/resources`` and
    /// ``OAuthClient/Configuration/audience``, which the token requests send too.
    public static let reservedParameterNames: Set<String> = [
        "response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "code_challenge",
        "code_challenge_method", "resource", "audience", "dpop_jkt",
    ]

    /// The authorization endpoint.
    public let authorizationEndpoint: URL
    /// The client identifier.
    public let clientID: String
    /// The redirect URI, exactly as registered; the code exchange must send the same string.
    public let redirectURI: String
    /// The requested scope, space-separated, or `nil` for the server's default.
    public let scope: String?
    /// The opaque value the callback must echo; it binds the callback to this request (CSRF protection).
    public let state: String
    /// The OpenID Connect nonce the URL carries (OpenID Connect Core §3.1.2.1), which the ID token must echo; `nil`
    /// for a plain OAuth request. ``OpenIDProvider`` makes one for every request.
    public let nonce: String?
    /// The PKCE pair whose challenge the URL carries.
    package let pkce: PKCE
    /// The DPoP key of the sign-in, made before the request: the code exchange proves possession of it and the tokens
    /// are bound to it; `nil` when the sign-in does not use DPoP.
    package let proofKey: DPoPKey?
    /// The RFC 8707 resource indicators the URL carries, one `resource` parameter each, in order.
    public let resources: [String]
    /// The `audience` the URL carries, if any.
    public let audience: String?
    /// Extra query parameters, such as `prompt` or `login_hint`.
    public let additionalParameters: [String: String]
    /// The URL to open: the endpoint (its own query kept, RFC 6749 §3.1) with the request's parameters, form-encoded.
    public let url: URL

    /// Builds an authorization request.
    ///
    /// - Parameters:
    ///   - authorizationEndpoint: `https`, or `http` to a loopback host; no fragment.
    ///   - clientID: The client identifier; printable ASCII.
    ///   - redirectURI: An absolute URI (custom schemes such as `com.example.app:/callback` are fine).
    ///   - scope: Space-separated scope tokens, or `nil` (an empty scope is omitted too).
    ///   - state: Printable ASCII; by default 32 random bytes, base64url-encoded.
    ///   - nonce: The OpenID Connect nonce, printable ASCII, or `nil` for none.
    ///   - pkce: The PKCE pair; keep it for the code exchange.
    ///   - proofKey: The sign-in's DPoP key, kept for the code exchange, or `nil` without DPoP.
    ///   - sendsProofKeyThumbprint: Whether the URL carries `proofKey`'s thumbprint as `dpop_jkt` (RFC 9449 §10),
    ///     after the PKCE parameters; ignored without a key.
    ///   - indicators: The resources and audience to ask for (RFC 8707 §2), after the PKCE parameters.
    ///   - additionalParameters: Extra parameters, none of them in ``reservedParameterNames``; added in name order.
    /// - Throws: `SessionError(.invalidInput)` when an argument breaks the rules above, or an additional parameter
    ///   repeats one SessionKit sets or one already in the endpoint's query.
    package init(
        authorizationEndpoint: URL,
        clientID: String,
        redirectURI: String,
        scope: String?,
        state: String = AuthorizationRequest.randomState(),
        nonce: String? = nil,
        pkce: PKCE,
        proofKey: DPoPKey? = nil,
        sendsProofKeyThumbprint: Bool = false,
        indicators: ResourceIndicators = .none,
        additionalParameters: [String: String] = [:]
    ) throws {
        try EndpointPolicy.validate(authorizationEndpoint, role: "authorization endpoint")
        guard Self.isPrintableASCII(clientID) else {
            throw SessionError(.invalidInput, "the client ID must be non-empty printable ASCII (RFC 6749 §A.1)")
        }
        guard Self.isPrintableASCII(state) else {
            throw SessionError(.invalidInput, "the state must be non-empty printable ASCII (RFC 6749 §A.5)")
        }
        if let nonce, !Self.isPrintableASCII(nonce) {
            throw SessionError(.invalidInput, "the nonce must be non-empty printable ASCII")
        }
        guard let redirect = URL(string: redirectURI), let scheme = redirect.scheme, !scheme.isEmpty else {
            throw SessionError(.invalidInput, "the redirect URI must be an absolute URI (RFC 6749 §3.1.2)")
        }
        let scope = scope.flatMap { $0.isEmpty ? nil : $0 }
        if let scope {
            let tokens = scope.split(separator: " ", omittingEmptySubsequences: false)
            guard tokens.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(Self.isScopeCharacter) }) else {
                throw SessionError(
                    .invalidInput, "the scope must be scope tokens separated by single spaces (RFC 6749 §3.3)")
            }
        }
        let existingQuery = URLComponents(url: authorizationEndpoint, resolvingAgainstBaseURL: false)?
            .percentEncodedQuery
        let existingNames = Set((existingQuery.flatMap { FormURLEncoding.decode($0) } ?? []).map(\.name))

        var pairs: [(name: String, value: String)] = [
            ("response_type", "code"),
            ("client_id", clientID),
            ("redirect_uri", redirectURI),
        ]
        if let scope { pairs.append(("scope", scope)) }
        pairs.append(("state", state))
        if let nonce { pairs.append(("nonce", nonce)) }
        pairs.append(("code_challenge", pkce.challenge))
        pairs.append(("code_challenge_method", pkce.method))
        if let proofKey, sendsProofKeyThumbprint { pairs.append(("dpop_jkt", proofKey.thumbprint)) }
        pairs += indicators.pairs
        for name in additionalParameters.keys.sorted() {
            guard !Self.reservedParameterNames.contains(name) else {
                throw SessionError(
                    .invalidInput, "\"\(name)\" is set by SessionKit and cannot be an additional parameter")
            }
            guard !name.isEmpty else { throw SessionError(.invalidInput, "an additional parameter has an empty name") }
            pairs.append((name, additionalParameters[name] ?? ""))
        }
        if let clash = pairs.first(where: { existingNames.contains($0.name) }) {
            throw SessionError(
                .invalidInput, "the authorization endpoint's query already has \"\(clash.name)\" (RFC 6749 §3.1)")
        }

        let encoded = FormURLEncoding.encode(pairs)
        guard var components = URLComponents(url: authorizationEndpoint, resolvingAgainstBaseURL: false) else {
            throw SessionError(.invalidInput, "the authorization endpoint is not a valid URL")
        }
        components.percentEncodedQuery = existingQuery.flatMap { $0.isEmpty ? nil : $0 + "&" + encoded } ?? encoded
        guard let url = components.url else {
            throw SessionError(.invalidInput, "the authorization request URL could not be built")
        }
        self.authorizationEndpoint = authorizationEndpoint
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.scope = scope
        self.state = state
        self.nonce = nonce
        self.pkce = pkce
        self.proofKey = proofKey
        self.resources = indicators.resources
        self.audience = indicators.audience
        self.additionalParameters = additionalParameters
        self.url = url
    }

    /// A fresh state value: 32 bytes of the platform's secure random generator, base64url-encoded (43
    /// characters).
    ///
    /// Traps if the platform's generator fails, as `SystemRandomNumberGenerator` does: a guessable state would
    /// open the redirect to cross-site request forgery (RFC 6749 §10.12).
    ///
    /// - Returns: The state.
    public static func randomState() -> String {
        Base64URL.encode(PlatformCrypto.requiredRandomBytes(count: 32))
    }

    private static func isPrintableASCII(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { (0x20...0x7E).contains($0) }
    }

    private static func isScopeCharacter(_ byte: UInt8) -> Bool {
        byte == 0x21 || (0x23...0x5B).contains(byte) || (0x5D...0x7E).contains(byte)
    }
}
