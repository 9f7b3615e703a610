import Foundation
import SessionKit

/// The OpenID Connect side of a ``MockAuthorizationServer``: its signing key, its discovery document and key set,
/// and the ID tokens it signs. Given the time, so it reads no clock.
struct MockOpenIDIssuer: Sendable {
    /// The key ID tokens are signed with, published in the key set under its thumbprint.
    let key: P256SigningKey
    /// A key that is not published, signing under the published key's `kid`: a token it signs fails only its
    /// signature check.
    let impostorKey: P256SigningKey
    let issuer: String
    let clientID: String
    /// Whether the server binds tokens to DPoP keys, which the discovery document then says (RFC 9449 §5.1).
    let dpop: Bool
    /// Which documents name the revocation endpoint.
    let revocationListing: MockAuthorizationServer.RevocationEndpointListing

    /// A new issuer with fresh keys.
    ///
    /// - Throws: `CryptoError` when the platform cannot generate a key.
    init(
        issuer: String, clientID: String, dpop: Bool = false,
        revocationListing: MockAuthorizationServer.RevocationEndpointListing = .discoveryAndAuthorizationServerMetadata
    ) throws {
        key = try P256SigningKey()
        impostorKey = try P256SigningKey()
        self.issuer = issuer
        self.clientID = clientID
        self.dpop = dpop
        self.revocationListing = revocationListing
    }

    /// The `kid`: the key's JWK thumbprint (RFC 7638), so it changes with the key and names nothing else.
    var keyID: String { key.thumbprint }

    /// The key set (RFC 7517 §5): the one signing key, for signatures with ES256 only.
    var keySetJSON: String {
        var jwk = key.publicJWK
        jwk["kid"] = .string(keyID)
        jwk["use"] = .string("sig")
        jwk["alg"] = .string("ES256")
        return JSONValue.object(["keys": .array([.object(jwk)])]).serialized
    }

    /// What the discovery document and the RFC 8414 metadata (§2) both say: the OAuth endpoints under the issuer,
    /// and with DPoP on its signing algorithm (an RFC 8414 member, RFC 9449 §5.1).
    private var oauthMembers: [String: JSONValue] {
        func endpoint(_ path: String) -> JSONValue { .string(issuer + path) }
        var members: [String: JSONValue] = [
            "issuer": .string(issuer),
            "authorization_endpoint": endpoint("/authorize"),
            "token_endpoint": endpoint("/token"),
            "jwks_uri": endpoint("/jwks"),
            "revocation_endpoint": endpoint("/revoke"),
            "device_authorization_endpoint": endpoint("/device"),
            "response_types_supported": Self.strings(["code"]),
            "grant_types_supported": Self.strings(MockAuthorizationServer.Grant.allCases.map(\.rawValue)),
            "code_challenge_methods_supported": Self.strings(["S256"]),
        ]
        if dpop { members["dpop_signing_alg_values_supported"] = Self.strings(["ES256"]) }
        return members
    }

    private static func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }

    /// The discovery document (OpenID Connect Discovery 1.0 §3), naming the mock's endpoints under the issuer.
    var discoveryJSON: String {
        var members = oauthMembers
        members["userinfo_endpoint"] = .string(issuer + "/userinfo")
        members["end_session_endpoint"] = .string(issuer + "/logout")
        members["id_token_signing_alg_values_supported"] = Self.strings(["ES256"])
        members["scopes_supported"] = Self.strings(["openid", "profile", "offline_access"])
        members["subject_types_supported"] = Self.strings(["public"])
        members["token_endpoint_auth_methods_supported"] = Self.strings(["none"])
        members["claims_supported"] = Self.strings(
            ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "at_hash", "name"])
        if revocationListing != .discoveryAndAuthorizationServerMetadata { members["revocation_endpoint"] = nil }
        return JSONValue.object(members).serialized
    }

    /// The RFC 8414 authorization server metadata (§2): the OAuth endpoints under the issuer, the revocation
    /// endpoint unless ``revocationListing`` says it is nowhere.
    var authorizationServerMetadataJSON: String {
        var members = oauthMembers
        if revocationListing == .nowhere { members["revocation_endpoint"] = nil }
        return JSONValue.object(members).serialized
    }

    /// The signed ID token `draft` describes, issued at `now` (OpenID Connect Core §2, §3.1.3.6), with what its
    /// tampering gets wrong.
    ///
    /// - Throws: `CryptoError` when the platform cannot sign.
    func sign(_ draft: MockAuthorizationState.IDTokenDraft, now: Date) throws -> String {
        let issuedAt = now.timeIntervalSince1970.rounded(.down)
        var claims: [String: JSONValue] = [
            "iss": .string(issuer), "sub": .string(draft.user), "aud": .string(clientID),
            "iat": .number(issuedAt), "exp": .number(issuedAt + 300),
            "auth_time": .number(draft.authTime.timeIntervalSince1970.rounded(.down)),
            "at_hash": .string(Self.accessTokenHash(draft.accessToken)), "name": .string(draft.user),
        ]
        if let nonce = draft.nonce { claims["nonce"] = .string(nonce) }
        var signingKey = key
        switch draft.tampering {
        case nil: break
        case .anotherSubject?: claims["sub"] = .string("not-" + draft.user)
        case .anotherNonce?: claims["nonce"] = .string("not-" + (draft.nonce ?? "the-nonce"))
        case .anotherIssuer?: claims["iss"] = .string(issuer + "/other")
        case .anotherAudience?: claims["aud"] = .string("not-" + clientID)
        case .expired?:
            // Beyond the one-minute leeway validators allow by default.
            claims["iat"] = .number(issuedAt - 600)
            claims["exp"] = .number(issuedAt - 300)
        case .signedByAnotherKey?: signingKey = impostorKey
        }
        let header: [String: JSONValue] = ["alg": .string("ES256"), "typ": .string("JWT"), "kid": .string(keyID)]
        return try CompactJWS.signed(header: header, claims: claims, with: signingKey)
    }

    /// `at_hash` for ES256: the left half of the access token's SHA-256, base64url (OpenID Connect Core §3.1.3.6).
    static func accessTokenHash(_ accessToken: String) -> String {
        IDTokenValidator.accessTokenHash(of: accessToken, algorithm: .es256)
    }
}
