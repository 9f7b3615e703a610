import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A token endpoint request (RFC 6749 §3.2): the form body for one grant, and the `URLRequest` that posts it.
///
/// The body is `grant_type`, the grant's own parameters, one `resource` per RFC 8707 indicator, `audience`, the
/// client's identification (`client_id`, and `client_secret` with ``ClientAuthentication/clientSecretPost(_:)``;
/// nothing with ``ClientAuthentication/clientSecretBasic(_:)``, whose header names the client), then any additional
/// parameters in name order, encoded as `application/x-www-form-urlencoded` with every character outside
/// `A–Z a–z 0–9 - . _ ~` percent-encoded (a space is `+`), so a token containing `+`, `/`, `=`, `&` or non-ASCII
/// arrives intact.
///
/// - Important: The description redacts every credential in the grant and the client secret.
package struct TokenRequest: Sendable, Equatable, CustomStringConvertible {
    /// The grant to exchange for tokens.
    ///
    /// - Important: The description redacts every credential the grant carries.
    package enum Grant: Sendable, Equatable, CustomStringConvertible {
        /// Exchange an authorization code, proving possession of the PKCE verifier (RFC 6749 §4.1.3, RFC 7636 §4.5).
        case authorizationCode(code: String, codeVerifier: String, redirectURI: String)
        /// Renew the access token (RFC 6749 §6); `scope`, if given, must not exceed the original grant.
        case refreshToken(String, scope: String?)
        /// Poll for a device authorization grant (RFC 8628 §3.4).
        case deviceCode(String)
        /// Resource owner password credentials (RFC 6749 §4.3). FOR TESTS ONLY: it hands the user's password to the
        /// app, which OAuth 2.0 Security BCP (RFC 9700 §2.4) forbids; it exists to drive a test authorization
        /// server without a browser.
        case password(username: String, password: String, scope: String?)

        /// The `grant_type` value.
        public var grantType: String {
            switch self {
            case .authorizationCode: "authorization_code"
            case .refreshToken: "refresh_token"
            case .deviceCode: "urn:ietf:params:oauth:grant-type:device_code"
            case .password: "password"
            }
        }

        /// The grant type, with codes, tokens and passwords redacted.
        public var description: String {
            switch self {
            case .authorizationCode(let code, let codeVerifier, let redirectURI):
                "authorization_code(code: \(Redaction.redact(code)), code_verifier: \(Redaction.redact(codeVerifier)), "
                    + "redirect_uri: \(redirectURI))"
            case .refreshToken(let refreshToken, let scope):
                "refresh_token(\(Redaction.redact(refreshToken)), scope: \(scope ?? "nil"))"
            case .deviceCode(let deviceCode):
                "device_code(\(Redaction.redact(deviceCode)))"
            case .password(let username, let password, let scope):
                "password(username: \(Redaction.redact(username)), password: \(Redaction.redact(password)), "
                    + "scope: \(scope ?? "nil"))"
            }
        }
    }

    /// The grant.
    public let grant: Grant
    /// The client identifier.
    public let clientID: String
    /// How the client authenticates.
    public let authentication: ClientAuthentication
    /// The RFC 8707 resources and the audience the tokens are for.
    public let indicators: ResourceIndicators
    /// Extra body parameters.
    public let additionalParameters: [String: String]
    /// The body's names and values, in order, before encoding.
    public let formParameters: [FormParameter]

    /// One name and value of a form body.
    ///
    /// - Important: The description shows only the values of `grant_type`, `client_id`, `scope`,
    ///   `redirect_uri`, `resource` and `audience`; every other value may be a credential and is redacted.
    package struct FormParameter: Sendable, Equatable, CustomStringConvertible {
        /// The parameter name.
        public let name: String
        /// The parameter value.
        public let value: String

        package static let publicNames: Set<String> = [
            "grant_type", "client_id", "scope", "redirect_uri", "resource", "audience",
        ]

        /// `name=value`, with the value redacted unless it is known not to be a credential.
        public var description: String {
            "\(name)=\(Self.publicNames.contains(name) ? value : Redaction.redact(value))"
        }
    }

    /// Builds a token request.
    ///
    /// - Parameters:
    ///   - grant: The grant. Codes, tokens and names must be non-empty; the code verifier must be a valid PKCE
    ///     verifier; the redirect URI must be the one the authorization request sent.
    ///   - clientID: The client identifier; non-empty.
    ///   - authentication: How the client authenticates; a secret must not be empty.
    ///   - indicators: The resources and audience to ask for.
    ///   - additionalParameters: Extra parameters; none may repeat a name this request sets, nor be `client_id`,
    ///     `resource` or `audience`, nor `client_secret` when `authentication` has a secret.
    /// - Throws: `SessionError(.invalidInput)` when a value is empty or invalid, or a parameter name repeats one
    ///   SessionKit sets. Messages never contain a credential.
    public init(
        grant: Grant,
        clientID: String,
        authentication: ClientAuthentication = .none,
        indicators: ResourceIndicators = .none,
        additionalParameters: [String: String] = [:]
    ) throws {
        guard !clientID.isEmpty else { throw SessionError(.invalidInput, "the client ID is empty") }
        try authentication.validate()
        var pairs: [(name: String, value: String)] = [("grant_type", grant.grantType)]
        switch grant {
        case .authorizationCode(let code, let codeVerifier, let redirectURI):
            guard !code.isEmpty else { throw SessionError(.invalidInput, "the authorization code is empty") }
            guard !redirectURI.isEmpty else { throw SessionError(.invalidInput, "the redirect URI is empty") }
            _ = try PKCE(verifier: codeVerifier)
            pairs += [("code", code), ("redirect_uri", redirectURI), ("code_verifier", codeVerifier)]
        case .refreshToken(let refreshToken, let scope):
            guard !refreshToken.isEmpty else { throw SessionError(.invalidInput, "the refresh token is empty") }
            pairs.append(("refresh_token", refreshToken))
            if let scope, !scope.isEmpty { pairs.append(("scope", scope)) }
        case .deviceCode(let deviceCode):
            guard !deviceCode.isEmpty else { throw SessionError(.invalidInput, "the device code is empty") }
            pairs.append(("device_code", deviceCode))
        case .password(let username, let password, let scope):
            guard !username.isEmpty, !password.isEmpty else {
                throw SessionError(.invalidInput, "the username or the password is empty")
            }
            pairs += [("username", username), ("password", password)]
            if let scope, !scope.isEmpty { pairs.append(("scope", scope)) }
        }
        pairs += indicators.pairs
        pairs += authentication.bodyPairs(clientID: clientID)
        // An authenticating client cannot add a second method (RFC 6749 §2.3.1: one per request).
        let reserved = Set(pairs.map(\.name)).union(ResourceIndicators.parameterNames)
            .union(authentication.reservedParameterNames)
        pairs += try FormPostRequest.extraPairs(additionalParameters, reserved: reserved)
        self.grant = grant
        self.clientID = clientID
        self.authentication = authentication
        self.indicators = indicators
        self.additionalParameters = additionalParameters
        self.formParameters = pairs.map { FormParameter(name: $0.name, value: $0.value) }
    }

    /// The form-encoded body.
    public var body: Data {
        Data(FormURLEncoding.encode(formParameters.map { ($0.name, $0.value) }).utf8)
    }

    /// The `POST` to send: the form body, `Content-Type: application/x-www-form-urlencoded`,
    /// `Accept: application/json` and `Cache-Control: no-store`.
    ///
    /// - Parameters:
    ///   - endpoint: The token endpoint: `https`, or `http` to a loopback host (RFC 6749 §3.2 requires TLS).
    ///   - now: The client's wall-clock time, for a client assertion's `iat` and `exp`.
    /// - Returns: The request.
    /// - Throws: `SessionError(.invalidInput)` when the endpoint is not acceptable.
    package func urlRequest(endpoint: URL, now: Date = Date()) throws -> URLRequest {
        var request = try FormPostRequest.make(
            endpoint: endpoint, pairs: formParameters.map { ($0.name, $0.value) }, role: "token endpoint")
        try authentication.authorize(&request, clientID: clientID, now: now)
        return request
    }

    /// The grant type, client and authentication method, with every credential redacted.
    public var description: String {
        let names = formParameters.map(\.name).joined(separator: ", ")
        return "TokenRequest(grant_type: \(grant.grantType), client_id: \(clientID), "
            + "client_auth: \(authentication.methodName), parameters: [\(names)])"
    }
}

extension TokenRequest: CustomReflectable {
    /// What `dump()`, `Mirror` and debuggers show: the grant and parameters as their redacted descriptions, so no
    /// code, verifier, token, password or extra secret shows.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "grant": grant.description,
                "clientID": clientID,
                "authentication": authentication.description,
                "additionalParameters": additionalParameters.keys.sorted().map { name in
                    FormParameter(name: name, value: additionalParameters[name] ?? "").description
                },
                "formParameters": formParameters.map(\.description),
            ],
            displayStyle: .struct
        )
    }

    /// The values this request carries that are credentials (everything but the grant type, client ID, scope,
    /// redirect URI, resources and audience), and every spelling of the client secret: what an error quoting the
    /// server's answer must not repeat.
    package var secrets: [String] {
        formParameters.filter { !FormParameter.publicNames.contains($0.name) }.map(\.value)
            + authentication.secrets(clientID: clientID)
    }
}

extension TokenRequest.Grant: CustomReflectable {
    /// What `dump()` and `Mirror` show: the redacted ``description``.
    public var customMirror: Mirror {
        Mirror(self, children: ["grant": description], displayStyle: .enum)
    }
}

extension TokenRequest.FormParameter: CustomReflectable {
    /// What `dump()` and `Mirror` show: the name, and the value redacted unless it is known not to be a credential.
    public var customMirror: Mirror {
        Mirror(self, children: ["parameter": description], displayStyle: .struct)
    }
}
