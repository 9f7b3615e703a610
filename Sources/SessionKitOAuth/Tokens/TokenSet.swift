import Foundation

/// The tokens a session holds, and when its access token expires on the local monotonic clock.
///
/// Expiry is measured from the moment the token response was received here, plus `expires_in`, on the
/// injected ``SessionClock``: the server's clock and this device's wall clock play no part, so a skewed or
/// changing wall clock never changes a refresh decision. A token set without `expires_in` is treated as fresh
/// until a server answers 401.
///
/// - Important: The description redacts every token.
public struct TokenSet: Sendable, Equatable, CustomStringConvertible {
    /// The bearer token sent in `Authorization`.
    public var accessToken: String
    /// The token that obtains new access tokens, when the server issued one.
    public var refreshToken: String?
    /// The OpenID Connect ID token, when the server issued one.
    public var idToken: String?
    /// The granted scope, space-separated, when the server said.
    public var scope: String?
    /// The token type: `Bearer`, or `DPoP` for tokens bound to ``proofKey`` (RFC 9449 §5).
    public var tokenType: String
    /// The key the tokens are bound to with DPoP, when they are: every request carries a proof signed by it, and
    /// the access token goes as `Authorization: DPoP`, never as a bearer token. `nil` for bearer tokens.
    public var proofKey: DPoPKey?
    /// The lifetime the server granted, when it said (`expires_in`).
    public var lifetime: Duration?
    /// When the access token expires on the local monotonic clock, or `nil` when the server gave no lifetime.
    public var expiresAt: ContinuousClock.Instant?
    /// The monotonic instant the response was received: ``expiresAt`` is ``lifetime`` after it.
    public var receivedAt: ContinuousClock.Instant
    /// The wall-clock time the response was received, kept only to restore a stored access token after restart.
    public var receivedAtWall: Date

    /// Creates a token set.
    ///
    /// - Parameters:
    ///   - accessToken: The bearer token.
    ///   - refreshToken: The refresh token, if any.
    ///   - idToken: The ID token, if any.
    ///   - scope: The granted scope, if known.
    ///   - tokenType: The token type; `Bearer` by default, `DPoP` for tokens bound to `proofKey`.
    ///   - proofKey: The DPoP key the tokens are bound to, if any.
    ///   - lifetime: `expires_in`, if the server sent it.
    ///   - receivedAt: The monotonic instant the response arrived (``receivedAt``), from which the lifetime counts.
    ///   - receivedAtWall: The wall-clock time the response arrived (``receivedAtWall``).
    public init(
        accessToken: String,
        refreshToken: String? = nil,
        idToken: String? = nil,
        scope: String? = nil,
        tokenType: String = "Bearer",
        proofKey: DPoPKey? = nil,
        lifetime: Duration? = nil,
        receivedAt: ContinuousClock.Instant = .now,
        receivedAtWall: Date = Date()
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.scope = scope
        self.tokenType = tokenType
        self.proofKey = proofKey
        self.lifetime = lifetime
        self.expiresAt = lifetime.map { receivedAt.advanced(by: $0) }
        self.receivedAt = receivedAt
        self.receivedAtWall = receivedAtWall
    }

    /// Whether the access token has less than `leeway` left at `now`.
    ///
    /// - Parameters:
    ///   - now: The current monotonic instant.
    ///   - leeway: How early to treat the token as expired.
    /// - Returns: `false` when the server gave no lifetime.
    public func isExpired(at now: ContinuousClock.Instant, leeway: Duration = .zero) -> Bool {
        guard let expiresAt else { return false }
        return now.advanced(by: leeway) >= expiresAt
    }

    /// The token types and whether a refresh token is present, with every token redacted.
    public var description: String {
        "TokenSet(access: \(Redaction.redact(accessToken)), refresh: \(Redaction.redact(refreshToken)), "
            + "type: \(tokenType)\(proofKey.map { ", key: \($0.thumbprint)" } ?? ""), scope: \(scope ?? "nil"), lifetime: \(lifetime.map { "\($0)" } ?? "nil"))"
    }
}

extension TokenSet: CustomReflectable {
    /// What `dump()`, `Mirror` and debuggers show: every field, with the tokens redacted as in ``description``.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "accessToken": Redaction.redact(accessToken),
                "refreshToken": Redaction.redact(refreshToken),
                "idToken": Redaction.redact(idToken),
                "scope": scope as Any,
                "tokenType": tokenType,
                "proofKey": proofKey as Any,
                "lifetime": lifetime as Any,
                "expiresAt": expiresAt as Any,
                "receivedAt": receivedAt,
                "receivedAtWall": receivedAtWall,
            ],
            displayStyle: .struct
        )
    }
}
