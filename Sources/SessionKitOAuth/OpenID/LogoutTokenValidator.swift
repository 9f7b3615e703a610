import Foundation

/// What a validated logout token says (OpenID Connect Back-Channel Logout 1.0 §2.4): which of the provider's users,
/// or which of their sessions at the provider, ended.
///
/// Only SessionKit makes one, after the token's signature, issuer, audience, times, event and identifiers were
/// checked and its `jti` was found unused. It carries no token.
public struct LogoutTokenClaims: Sendable, Hashable {
    /// `iss`: the issuer, exactly as the provider's metadata names it.
    public let issuer: String
    /// `sub`, when the token names the user: every session of the user at this issuer ends.
    public let subject: String?
    /// `sid`, when the token names one session at the provider: the sessions whose ID token carried it end.
    public let sessionID: String?
    /// `jti`: the token's identifier, refused when it comes again.
    public let tokenID: String
    /// `iat`.
    public let issuedAt: Date
    /// `exp`.
    public let expiresAt: Date
}

/// Validates logout tokens for one client of one provider (OpenID Connect Back-Channel Logout 1.0 §2.6).
///
/// The checks an ID token has come first, in the same order and with the same names (``IDTokenCheck``): the compact
/// form, the algorithm's allow-list, the key for the token's `kid`, the signature, `iss`, `aud`, `exp`, `iat`. Then
/// what only a logout token has: a `typ` header, if any, of `logout+jwt`; an `iat` no older than the maximum age;
/// the back-channel logout event in `events`; no `nonce` (§2.4: a token that has one is an ID token, and one
/// replayed as a logout token must not end anything); a `sub` or a `sid`; a `jti`. Whether the `jti` was seen
/// before is the caller's (`LogoutTokenReplayGuard`), once everything else holds.
///
/// Pure: the key set and the provider's current time are given.
package struct LogoutTokenValidator: Sendable {
    /// The member of `events` that makes a JWT a logout token (§2.4).
    package static let event = "http://schemas.openid.net/event/backchannel-logout"

    /// The ID token rules the shared checks are made by.
    package let idTokens: IDTokenValidator
    /// How old a token's `iat` may be on the provider's clock, beyond the leeway.
    package let maximumAge: Duration

    package init(issuer: String, clientID: String, validation: IDTokenValidation, maximumAge: Duration) {
        self.idTokens = IDTokenValidator(issuer: issuer, clientID: clientID, validation: validation)
        self.maximumAge = maximumAge
    }

    /// What the validator asks of its caller.
    package enum Outcome: Sendable {
        /// The token is valid, its `jti` still to be checked for a replay.
        case valid(LogoutTokenClaims)
        /// No key has the token's `kid`: fetch the key set again (once) and retry.
        case needsKeys
    }

    /// Validates `token`.
    ///
    /// - Parameters:
    ///   - token: The logout token, as the `logout_token` form parameter carried it.
    ///   - keys: The provider's key set.
    ///   - now: The provider's current time.
    /// - Returns: The claims, or ``Outcome/needsKeys``.
    /// - Throws: `SessionError(.logoutTokenRejected)` naming the failed check; its message never quotes the token.
    package func validate(_ token: String, keys: JSONWebKeySet, now: Date) throws(SessionError) -> Outcome {
        do {
            return try checked(token, keys: keys, now: now)
        } catch  where error.code == .idTokenRejected {
            throw Self.asLogoutToken(error)
        }
    }

    private func checked(_ token: String, keys: JSONWebKeySet, now: Date) throws(SessionError) -> Outcome {
        let jws = try CompactJWS(token)
        if let type = jws.header["typ"] {
            // RFC 8725 §3.11 explicit typing; the media type may be written with its "application/" prefix.
            let name = type.stringValue?.lowercased()
            guard name == "logout+jwt" || name == "application/logout+jwt" else {
                throw Self.refusal(.tokenType, "has a \"typ\" header that is not \"logout+jwt\"")
            }
        }
        let algorithm = try idTokens.acceptedAlgorithm(of: jws)
        guard try IDTokenValidator.verify(jws, algorithm: algorithm, keys: keys) else { return .needsKeys }
        return .valid(try checkClaims(jws.claims, now: now))
    }

    /// Checks the claims of a token whose signature verified; a refusal of a check an ID token has too is told as an
    /// ID token's, and ``validate(_:keys:now:)`` tells it of the logout token.
    package func checkClaims(_ claims: [String: JSONValue], now: Date) throws(SessionError) -> LogoutTokenClaims {
        let leeway = idTokens.validation.leeway.timeInterval
        let nowSeconds = now.timeIntervalSince1970
        guard case .string(let issuer)? = claims["iss"], issuer == idTokens.issuer else {
            throw Self.refusal(.issuer, "was not issued by the provider (\"iss\" differs)")
        }
        let audiences = try IDTokenValidator.audiences(in: claims)
        guard audiences.contains(idTokens.clientID) else {
            throw Self.refusal(.audience, "is not for this client (\"aud\" does not contain its ID)")
        }
        guard let expiry = IDTokenValidator.time(claims["exp"]) else {
            throw Self.refusal(.expiry, "has no \"exp\" time")
        }
        guard nowSeconds - leeway < expiry else {
            throw Self.refusal(.expiry, "has expired on the provider's clock")
        }
        guard let issuedAt = IDTokenValidator.time(claims["iat"]), issuedAt <= nowSeconds + leeway else {
            throw Self.refusal(.issuedAt, "has no \"iat\", or one ahead of the provider's clock")
        }
        guard nowSeconds - issuedAt <= maximumAge.timeInterval + leeway else {
            throw Self.refusal(.issuedAt, "was issued longer ago than a logout token is accepted (\"iat\")")
        }
        guard case .object(let events)? = claims["events"], case .object? = events[Self.event] else {
            throw Self.refusal(.logoutEvent, "has no back-channel logout event in \"events\"")
        }
        guard claims["nonce"] == nil else {
            throw Self.refusal(.nonce, "has a \"nonce\", which a logout token must not have")
        }
        let subject = Self.identifier(claims["sub"])
        let session = Self.identifier(claims["sid"])
        let malformed = (claims["sub"] != nil && subject == nil) || (claims["sid"] != nil && session == nil)
        guard !malformed, subject != nil || session != nil else {
            throw Self.refusal(.subjectOrSession, "names neither a \"sub\" nor a \"sid\" string")
        }
        guard let tokenID = Self.identifier(claims["jti"]) else {
            throw Self.refusal(.tokenID, "has no \"jti\" string of 1 to 255 bytes")
        }
        return LogoutTokenClaims(
            issuer: issuer, subject: subject, sessionID: session, tokenID: tokenID,
            issuedAt: Date(timeIntervalSince1970: issuedAt), expiresAt: Date(timeIntervalSince1970: expiry))
    }

    /// How long a token's `jti` must be remembered: until the token would be refused anyway, for its expiry or its
    /// age, whichever comes later, plus the leeway.
    package func retention(of claims: LogoutTokenClaims) -> Date {
        let aged = claims.issuedAt.addingTimeInterval(maximumAge.timeInterval)
        return max(claims.expiresAt, aged).addingTimeInterval(idTokens.validation.leeway.timeInterval)
    }

    /// A string of 1 to 255 bytes, or `nil`.
    private static func identifier(_ value: JSONValue?) -> String? {
        guard case .string(let text)? = value, !text.isEmpty, text.utf8.count <= 255 else { return nil }
        return text
    }

    /// A refusal naming `check`; `reason` completes "the logout token …" and never contains the token.
    package static func refusal(_ check: IDTokenCheck, _ reason: String) -> SessionError {
        SessionError(.logoutTokenRejected, "the logout token \(reason)", idTokenCheck: check)
    }

    /// An ID token check's refusal, told of the logout token it was made on.
    private static func asLogoutToken(_ error: SessionError) -> SessionError {
        let reason = error.message.hasPrefix("the ID token ") ? String(error.message.dropFirst(13)) : error.message
        return SessionError(.logoutTokenRejected, "the logout token \(reason)", idTokenCheck: error.idTokenCheck)
    }
}

/// The `jti`s of the logout tokens a provider client accepted, each kept until its token would be refused anyway
/// (`LogoutTokenValidator/retention(of:)`), so that a replayed token ends nothing: one naming only `sub`,
/// replayed later, would end a session the user started after it.
///
/// Per process. A replay to another instance of a server finds nothing there to end but what the first delivery
/// already ended everywhere: the first one deleted the records, which every instance's sessions follow. An actor:
/// logout tokens are rare, and it keeps a lock out of the module.
package actor LogoutTokenReplayGuard {
    /// The most `jti`s kept; past it the one whose retention ends soonest is dropped first.
    package static let capacity = 65_536

    private var seen: [String: Date] = [:]

    package init() {}

    /// Records `tokenID` until `retention`, if it was not recorded: `false` for a replay.
    package func admit(_ tokenID: String, until retention: Date, now: Date) -> Bool {
        guard seen[tokenID] == nil else { return false }
        if seen.count >= Self.capacity {
            seen = seen.filter { $0.value > now }
            if seen.count >= Self.capacity, let soonest = seen.min(by: { $0.value < $1.value }) {
                seen[soonest.key] = nil
            }
        }
        seen[tokenID] = retention
        return true
    }

    /// How many `jti`s are kept.
    package var count: Int { seen.count }
}
