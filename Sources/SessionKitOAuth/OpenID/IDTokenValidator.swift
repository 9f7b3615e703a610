import Foundation

/// Validates ID tokens for one client of one provider (OpenID Connect Core §3.1.3.7, §3.1.3.6, §12.2).
///
/// Pure: the key set and the provider's current time are given, so every check runs in a unit test without a
/// network or a clock. ``OpenIDProvider`` feeds it the keys it fetched and the time its clock offset gives.
package struct IDTokenValidator: Sendable {
    /// What the validator asks of its caller.
    package enum Outcome: Sendable {
        /// The token is valid; these are its claims.
        case valid(IDTokenClaims)
        /// No key has the token's `kid`: fetch the key set again (once) and retry.
        case needsKeys
    }

    /// The issuer the token must name, exactly.
    package let issuer: String
    /// The client the token must be for.
    package let clientID: String
    /// The rules.
    package let validation: IDTokenValidation

    package init(issuer: String, clientID: String, validation: IDTokenValidation) {
        self.issuer = issuer
        self.clientID = clientID
        self.validation = validation
    }

    /// Validates `token`.
    ///
    /// - Parameters:
    ///   - token: The ID token.
    ///   - keys: The provider's key set.
    ///   - nonce: The nonce the authorization request sent; `nil` where none was sent (a refresh).
    ///   - accessToken: The access token issued with the ID token, for `at_hash`.
    ///   - now: The provider's current time.
    /// - Returns: The claims, or ``Outcome/needsKeys``.
    /// - Throws: `SessionError(.idTokenRejected)` naming the failed check.
    package func validate(
        _ token: String, keys: JSONWebKeySet, nonce: String?, accessToken: String?, now: Date
    ) throws(SessionError) -> Outcome {
        let jws = try CompactJWS(token)
        let algorithm = try acceptedAlgorithm(of: jws)
        guard try Self.verify(jws, algorithm: algorithm, keys: keys) else { return .needsKeys }
        return .valid(try checkClaims(of: jws, algorithm: algorithm, nonce: nonce, accessToken: accessToken, now: now))
    }

    /// Whether `jws` is signed by the provider's key for its `kid` and `algorithm`: `false` when no key has that
    /// `kid` (fetch the key set again).
    ///
    /// - Throws: A refusal for ``IDTokenCheck/key`` (no key fits) or ``IDTokenCheck/signature``.
    package static func verify(
        _ jws: CompactJWS, algorithm: SignatureAlgorithm, keys: JSONWebKeySet
    ) throws(SessionError) -> Bool {
        switch keys.select(keyID: jws.keyID, algorithm: algorithm) {
        case .unknownKeyID:
            return false
        case .refused(let reason):
            throw CompactJWS.refusal(.key, reason)
        case .key(let key):
            guard key.isValidSignature(jws.signature, for: jws.signingInput, algorithm: algorithm) else {
                throw CompactJWS.refusal(.signature, "has a signature that the provider's key does not verify")
            }
            return true
        }
    }

    /// The audiences `claims` name: `aud` as a string or a non-empty array of strings.
    ///
    /// - Throws: A refusal for ``IDTokenCheck/audience``.
    package static func audiences(in claims: [String: JSONValue]) throws(SessionError) -> [String] {
        switch claims["aud"] {
        case .string(let single)?: return [single]
        case .array(let values)? where !values.isEmpty && values.allSatisfy({ $0.stringValue != nil }):
            return values.compactMap(\.stringValue)
        default: throw CompactJWS.refusal(.audience, "has no \"aud\" string or array of strings")
        }
    }

    /// The refusal for a token whose `kid` is still unknown after the key set was fetched again.
    package static var unknownKey: SessionError {
        CompactJWS.refusal(.key, "names a \"kid\" the provider's key set does not have")
    }

    /// The header's algorithm, when it is on the allow-list.
    package func acceptedAlgorithm(of jws: CompactJWS) throws(SessionError) -> SignatureAlgorithm {
        guard let algorithm = SignatureAlgorithm(rawValue: jws.algorithmName),
            validation.algorithms.contains(algorithm)
        else {
            let name = ServerText.sanitized(jws.algorithmName, limit: 16)
            throw CompactJWS.refusal(.algorithm, "is signed with \"\(name)\", which is not an accepted algorithm")
        }
        return algorithm
    }

    /// Checks the claims of a token whose signature verified.
    package func checkClaims(
        of jws: CompactJWS, algorithm: SignatureAlgorithm, nonce: String?, accessToken: String?, now: Date
    ) throws(SessionError) -> IDTokenClaims {
        let claims = jws.claims
        let leeway = validation.leeway.timeInterval
        let nowSeconds = now.timeIntervalSince1970

        guard case .string(let tokenIssuer)? = claims["iss"], tokenIssuer == issuer else {
            throw CompactJWS.refusal(.issuer, "was not issued by the provider (\"iss\" differs)")
        }
        guard case .string(let subject)? = claims["sub"], !subject.isEmpty, subject.utf8.count <= 255 else {
            throw CompactJWS.refusal(.subject, "has no \"sub\" string of 1 to 255 bytes")
        }
        let audiences = try Self.audiences(in: claims)
        guard audiences.contains(clientID) else {
            throw CompactJWS.refusal(.audience, "is not for this client (\"aud\" does not contain its ID)")
        }
        let authorizedParty = claims["azp"]?.stringValue
        if claims["azp"] != nil, authorizedParty != clientID {
            throw CompactJWS.refusal(.authorizedParty, "was issued to another party (\"azp\" is not the client)")
        }
        if audiences.count > 1, authorizedParty == nil {
            throw CompactJWS.refusal(.authorizedParty, "has several audiences and no \"azp\"")
        }
        guard let expiry = Self.time(claims["exp"]) else {
            throw CompactJWS.refusal(.expiry, "has no \"exp\" time")
        }
        guard nowSeconds - leeway < expiry else {
            throw CompactJWS.refusal(.expiry, "has expired on the provider's clock")
        }
        if claims["nbf"] != nil {
            guard let notBefore = Self.time(claims["nbf"]), notBefore <= nowSeconds + leeway else {
                throw CompactJWS.refusal(.notBefore, "is not valid yet on the provider's clock (\"nbf\")")
            }
        }
        guard let issuedAt = Self.time(claims["iat"]), issuedAt <= nowSeconds + leeway else {
            throw CompactJWS.refusal(.issuedAt, "has no \"iat\", or one ahead of the provider's clock")
        }
        if let nonce {
            guard case .string(let tokenNonce)? = claims["nonce"], Self.equalInConstantTime(tokenNonce, nonce) else {
                throw CompactJWS.refusal(.nonce, "does not carry the nonce the authorization request sent")
            }
        }
        let authenticatedAt = Self.time(claims["auth_time"])
        if claims["auth_time"] != nil, authenticatedAt == nil {
            throw CompactJWS.refusal(.authTime, "has an \"auth_time\" that is not a time")
        }
        if let maximumAge = validation.maximumAuthenticationAge {
            guard let authenticatedAt, nowSeconds - authenticatedAt <= maximumAge.timeInterval + leeway else {
                throw CompactJWS.refusal(.authTime, "shows no authentication within the maximum age asked")
            }
        }
        if let accessToken, claims["at_hash"] != nil {
            guard case .string(let hash)? = claims["at_hash"],
                Self.equalInConstantTime(hash, Self.accessTokenHash(of: accessToken, algorithm: algorithm))
            else {
                throw CompactJWS.refusal(.accessTokenHash, "has an \"at_hash\" that does not match the access token")
            }
        }
        return IDTokenClaims(
            issuer: tokenIssuer, subject: subject, audiences: audiences, authorizedParty: authorizedParty,
            expiresAt: Date(timeIntervalSince1970: expiry), issuedAt: Date(timeIntervalSince1970: issuedAt),
            authenticatedAt: authenticatedAt.map(Date.init(timeIntervalSince1970:)),
            displayName: JWT.displayName(in: claims), email: claims["email"]?.stringValue)
    }

    /// `at_hash` for `accessToken`: the left half of its hash with the algorithm's hash function, base64url (OpenID
    /// Connect Core §3.1.3.6); SHA-512 for EdDSA with Ed25519 (Core 1.0 errata set 2).
    package static func accessTokenHash(of accessToken: String, algorithm: SignatureAlgorithm) -> String {
        let digest: Digest =
            switch algorithm.rawValue {
            case "RS384", "PS384", "ES384": .sha384
            case "RS512", "PS512", "EdDSA": .sha512
            default: .sha256
            }
        let hash = PlatformCrypto.digest(digest, of: Array(accessToken.utf8))
        return Base64URL.encode(hash.prefix(hash.count / 2))
    }

    /// A NumericDate (RFC 7519 §2): a finite number of seconds since 1970, within the years 1970–9999.
    package static func time(_ value: JSONValue?) -> Double? {
        guard case .number(let seconds)? = value, seconds.isFinite, seconds >= 0, seconds < 253_402_300_800 else {
            return nil
        }
        return seconds
    }

    /// Whether two strings have the same bytes, in time that depends on their lengths only.
    package static func equalInConstantTime(_ lhs: String, _ rhs: String) -> Bool {
        let (left, right) = (Array(lhs.utf8), Array(rhs.utf8))
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }
}
