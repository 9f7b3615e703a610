import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How an ``OAuthClient`` proves its identity to the authorization server (RFC 6749 §2.3).
///
/// A public client, such as an app on the user's device, cannot keep a secret and identifies itself with
/// `client_id` alone: ``none``, the default. A confidential client, such as a server-side backend acting for its
/// users, authenticates with the secret the authorization server issued it:
///
/// - ``clientSecretBasic(_:)``: HTTP Basic (RFC 6749 §2.3.1), the method every server must support. The client ID
///   and the secret are each form-urlencoded (RFC 6749 Appendix B) before they are joined with `:` and
///   base64-encoded, so an ID or secret containing `:`, `+`, `%`, a space or non-ASCII arrives intact. The body
///   then carries no `client_id` on token and revocation requests: the header identifies the client (as in the
///   examples of RFC 6749 §4.1.3 and RFC 7009 §2.1). The device authorization request keeps `client_id` in its
///   body, which RFC 8628 §3.1 allows and django-oauth-toolkit requires.
/// - ``clientSecretPost(_:)``: `client_id` and `client_secret` in the form body (RFC 6749 §2.3.1), which the
///   RFC allows only for clients that cannot use Basic.
///
/// The client authenticates on every request RFC 6749 §3.2.1, RFC 7009 §2.1 and RFC 8628 §3.1 ask it to: token
/// grants (code, refresh, device code, password), revocation and device authorization. It never sends the secret
/// anywhere else: not in the authorization request URL, and never on a redirect (the client follows none).
///
/// An authorization server that rejects the client's credentials answers `invalid_client`; the client throws
/// `SessionError(.authorizationFailed)` with ``SessionError/oauthError`` `invalid_client`. That is a configuration
/// problem, not a rejected grant: a session whose refresh fails this way stays signed in (it is not
/// `refreshRejected`).
///
/// - ``privateKeyJWT(p256PrivateKey:keyID:)``: a JWT the client signs with its own P-256 key for each request
///   (`private_key_jwt`, RFC 7523 §2.2, OpenID Connect Core §9), so no shared secret exists at all. Its `iss` and
///   `sub` are the client ID, its `aud` the URL of the endpoint the request goes to, its `jti` unique, and it
///   expires a minute after it was made.
///
/// More methods can be added without breaking callers: this is a struct with static members rather than an enum a
/// caller could switch over exhaustively.
///
/// - Important: The secret never appears in a description, `dump()`, `Mirror` or error message: every one of
///   them shows only the method's name.
public struct ClientAuthentication: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    private enum Method: Sendable, Equatable {
        case none
        case basic(String)
        case post(String)
        case privateKeyJWT(AssertionKey)
    }

    /// A client's signing key for `private_key_jwt`; equal when the public keys and key IDs are.
    private struct AssertionKey: Sendable, Equatable {
        let key: P256SigningKey
        let keyID: String?

        static func == (lhs: AssertionKey, rhs: AssertionKey) -> Bool {
            lhs.key.publicKey == rhs.key.publicKey && lhs.keyID == rhs.keyID
        }
    }

    /// The `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
    package static let jwtBearerAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    /// How long a client assertion is valid after it was made.
    package static let assertionLifetime: TimeInterval = 60

    private let method: Method

    private init(_ method: Method) {
        self.method = method
    }

    /// A public client (RFC 6749 §2.1): `client_id` alone, no secret. The default.
    public static let none = ClientAuthentication(.none)

    /// A confidential client that authenticates with HTTP Basic (`client_secret_basic`, RFC 6749 §2.3.1).
    ///
    /// - Parameter secret: The client secret the authorization server issued; it must not be empty (a request
    ///   made with an empty one throws `invalidInput` and sends nothing).
    /// - Returns: The method.
    public static func clientSecretBasic(_ secret: String) -> ClientAuthentication {
        ClientAuthentication(.basic(secret))
    }

    /// A confidential client that sends `client_id` and `client_secret` in the form body (`client_secret_post`,
    /// RFC 6749 §2.3.1).
    ///
    /// - Parameter secret: The client secret the authorization server issued; it must not be empty.
    /// - Returns: The method.
    public static func clientSecretPost(_ secret: String) -> ClientAuthentication {
        ClientAuthentication(.post(secret))
    }

    /// A confidential client that authenticates with a JWT signed by its own P-256 key (`private_key_jwt`,
    /// RFC 7523 §2.2; ES256, RFC 7518 §3.4). Register the key's public part with the authorization server.
    ///
    /// - Parameters:
    ///   - p256PrivateKey: The 32-byte private scalar, big-endian (CryptoKit's
    ///     `P256.Signing.PrivateKey.rawRepresentation`). It stays in memory; it is never printed.
    ///   - keyID: The `kid` the server knows the key by, or `nil`.
    /// - Returns: The method.
    /// - Throws: `SessionError(.invalidInput)` when the bytes are not a P-256 private key.
    public static func privateKeyJWT(p256PrivateKey: [UInt8], keyID: String? = nil) throws -> ClientAuthentication {
        do {
            let key = try P256SigningKey(storageRepresentation: p256PrivateKey)
            return ClientAuthentication(.privateKeyJWT(AssertionKey(key: key, keyID: keyID)))
        } catch {
            throw SessionError(.invalidInput, "the client's private key is not a P-256 private key: \(error)")
        }
    }

    /// The method's name as OAuth 2.0 Dynamic Client Registration spells it (RFC 7591 §2,
    /// `token_endpoint_auth_method`): `none`, `client_secret_basic`, `client_secret_post` or `private_key_jwt`.
    public var methodName: String {
        switch method {
        case .none: "none"
        case .basic: "client_secret_basic"
        case .post: "client_secret_post"
        case .privateKeyJWT: "private_key_jwt"
        }
    }

    /// The body parameters a caller's additional parameters must not repeat: `client_id`, and for a client that
    /// authenticates every other method's parameters too (RFC 6749 §2.3.1: one method per request). A public
    /// client may still add a `client_secret` of its own.
    package var reservedParameterNames: Set<String> {
        switch method {
        case .none: ["client_id"]
        case .basic, .post, .privateKeyJWT: ["client_id", "client_secret", "client_assertion", "client_assertion_type"]
        }
    }

    /// The method's name, never the secret.
    public var description: String {
        switch method {
        case .none: "ClientAuthentication.none"
        case .basic(let secret), .post(let secret):
            "ClientAuthentication.\(methodName)(\(Redaction.redact(secret)))"
        case .privateKeyJWT(let assertion):
            "ClientAuthentication.private_key_jwt(kid: \(assertion.keyID ?? "none"), thumbprint: "
                + "\(assertion.key.thumbprint))"
        }
    }

    /// The same as ``description``: the method's name, never the secret.
    public var debugDescription: String { description }

    /// The secret, or `nil` for a public client.
    package var secret: String? {
        switch method {
        case .none, .privateKeyJWT: nil
        case .basic(let secret), .post(let secret): secret
        }
    }

    /// Whether the client authenticates with an `Authorization: Basic` header.
    package var usesBasic: Bool {
        if case .basic = method { return true }
        return false
    }

    /// Checks that a secret, if the method has one, is not empty.
    ///
    /// - Throws: `SessionError(.invalidInput)`, which names the method and never the secret.
    package func validate() throws {
        if let secret, secret.isEmpty {
            throw SessionError(.invalidInput, "the client secret of \(methodName) is empty")
        }
    }

    /// The body parameters that authenticate or identify the client, to append after the request's own.
    ///
    /// - Parameters:
    ///   - clientID: The client identifier.
    ///   - keepsClientID: Whether the body names the client even when the Basic header already does.
    /// - Returns: `client_id` (omitted for Basic unless `keepsClientID`), then `client_secret` for post.
    package func bodyPairs(clientID: String, keepsClientID: Bool = false) -> [(name: String, value: String)] {
        switch method {
        case .none, .privateKeyJWT: [("client_id", clientID)]
        case .basic: keepsClientID ? [("client_id", clientID)] : []
        case .post(let secret): [("client_id", clientID), ("client_secret", secret)]
        }
    }

    /// The `Authorization` header value for Basic (RFC 6749 §2.3.1, RFC 7617), or `nil` for another method.
    ///
    /// - Parameter clientID: The client identifier.
    /// - Returns: `Basic base64(urlencode(client_id) ":" urlencode(secret))`.
    package func authorizationHeader(clientID: String) -> String? {
        guard case .basic(let secret) = method else { return nil }
        let credentials = FormURLEncoding.encode(clientID) + ":" + FormURLEncoding.encode(secret)
        return "Basic " + Data(credentials.utf8).base64EncodedString()
    }

    /// Every spelling of the secret a server's error text could quote: the secret itself, its form-encoded form
    /// and, for Basic, the header's credentials; empty for a public client.
    ///
    /// - Parameter clientID: The client identifier.
    /// - Returns: What ``SessionError`` messages must not repeat.
    package func secrets(clientID: String) -> [String] {
        guard let secret, !secret.isEmpty else { return [] }
        var secrets = [secret, FormURLEncoding.encode(secret)]
        if let header = authorizationHeader(clientID: clientID) { secrets.append(String(header.dropFirst(6))) }
        return secrets
    }

    /// Authenticates `request`: the `Authorization` header for Basic; for `private_key_jwt` the client assertion,
    /// made now for the request's URL, appended to the form body; other methods change nothing.
    ///
    /// - Parameters:
    ///   - request: A form `POST` to one of the configured endpoints.
    ///   - clientID: The client identifier.
    ///   - now: The client's wall-clock time (its injected clock), for the assertion's `iat` and `exp`.
    /// - Throws: `SessionError(.invalidInput)` when the assertion cannot be signed.
    package func authorize(_ request: inout URLRequest, clientID: String, now: Date) throws {
        if let header = authorizationHeader(clientID: clientID) {
            request.setFieldValues([("Authorization", header)])
        }
        guard case .privateKeyJWT(let assertion) = method, let endpoint = request.url else { return }
        let jwt = try Self.clientAssertion(assertion, clientID: clientID, audience: endpoint, now: now)
        let pairs = FormURLEncoding.encode([
            ("client_assertion_type", Self.jwtBearerAssertionType), ("client_assertion", jwt),
        ])
        let body = request.httpBody.map { String(decoding: $0, as: UTF8.self) } ?? ""
        request.httpBody = Data((body.isEmpty ? pairs : body + "&" + pairs).utf8)
    }

    /// A client assertion (RFC 7523 §3): `iss` and `sub` the client, `aud` the endpoint, a random `jti`, `iat` now
    /// and `exp` a minute later, signed ES256.
    private static func clientAssertion(
        _ assertion: AssertionKey, clientID: String, audience: URL, now: Date
    ) throws -> String {
        var header: [String: JSONValue] = ["alg": .string("ES256"), "typ": .string("JWT")]
        if let keyID = assertion.keyID { header["kid"] = .string(keyID) }
        let issuedAt = now.timeIntervalSince1970.rounded(.down)
        let claims: [String: JSONValue] = [
            "iss": .string(clientID), "sub": .string(clientID), "aud": .string(audience.absoluteString),
            "jti": .string(Base64URL.encode(PlatformCrypto.requiredRandomBytes(count: 16))),
            "iat": .number(issuedAt), "exp": .number(issuedAt + assertionLifetime),
        ]
        do {
            return try CompactJWS.signed(header: header, claims: claims, with: assertion.key)
        } catch {
            throw SessionError(.invalidInput, "the client assertion could not be signed: \(error)")
        }
    }
}

extension ClientAuthentication: CustomReflectable {
    /// What `dump()`, `Mirror` and debuggers show: the method's name, never the secret.
    public var customMirror: Mirror {
        Mirror(self, children: ["method": methodName], displayStyle: .struct)
    }
}
