/// The check of OpenID Connect Core §3.1.3.7 (and §12.2 for refreshes) that an ID token failed, or of OpenID
/// Connect Back-Channel Logout 1.0 §2.6 that a logout token failed.
///
/// Carried by a ``SessionError`` of code ``SessionError/Code/idTokenRejected`` (or
/// ``SessionError/Code/logoutTokenRejected``) as ``SessionError/idTokenCheck``. A logout token is checked as an ID
/// token is (format, algorithm, key, signature, issuer, audience, expiry, issuedAt), then by the checks below that
/// only a logout token has. The checks are static values, like ``SessionError/Code``, so new ones can be added
/// without breaking callers that switch on them.
public struct IDTokenCheck: Hashable, Sendable, CustomStringConvertible {
    private let name: String

    private init(_ name: String) { self.name = name }

    /// The token is not a compact JWS of three base64url parts with JSON header and claims (RFC 7515 §7.1).
    public static let format = IDTokenCheck("format")
    /// The token is encrypted (a JWE of five parts), which SessionKit does not decrypt.
    public static let encrypted = IDTokenCheck("encrypted")
    /// The header's `alg` is not on the allow-list: `none`, an HMAC algorithm (a public client has no secret, and an
    /// HMAC keyed with a public key is forgeable), or one the app did not allow.
    public static let algorithm = IDTokenCheck("algorithm")
    /// The header names an extension in `crit` that SessionKit does not understand (RFC 7515 §4.1.11).
    public static let critical = IDTokenCheck("critical")
    /// No key of the provider's key set fits: an unknown `kid` (after one fetch of the keys), a key of another
    /// type, use or algorithm than the header's, or no `kid` where several keys could fit.
    public static let key = IDTokenCheck("key")
    /// The signature does not verify with the provider's key.
    public static let signature = IDTokenCheck("signature")
    /// `iss` is not exactly the provider's issuer.
    public static let issuer = IDTokenCheck("issuer")
    /// `aud` does not contain the client ID.
    public static let audience = IDTokenCheck("audience")
    /// `aud` names several audiences and `azp` is not the client ID.
    public static let authorizedParty = IDTokenCheck("authorizedParty")
    /// `exp` is missing or has passed on the provider's clock, beyond the leeway.
    public static let expiry = IDTokenCheck("expiry")
    /// `nbf` lies ahead on the provider's clock, beyond the leeway.
    public static let notBefore = IDTokenCheck("notBefore")
    /// `iat` is missing or lies ahead on the provider's clock, beyond the leeway.
    public static let issuedAt = IDTokenCheck("issuedAt")
    /// `nonce` is not the one the authorization request sent, or a nonce is missing where one was sent.
    public static let nonce = IDTokenCheck("nonce")
    /// `auth_time` is missing where a maximum authentication age was asked, or older than it allows.
    public static let authTime = IDTokenCheck("authTime")
    /// `at_hash` does not match the access token issued with the ID token (OpenID Connect Core §3.1.3.6).
    public static let accessTokenHash = IDTokenCheck("accessTokenHash")
    /// `sub` is missing, empty or not a string.
    public static let subject = IDTokenCheck("subject")
    /// A refreshed ID token names another issuer, subject or audience than the account it refreshes
    /// (OpenID Connect Core §12.2): it is refused, never adopted.
    public static let sameAccount = IDTokenCheck("sameAccount")

    // MARK: Logout tokens (Back-Channel Logout 1.0 §2.4, §2.6)

    /// A logout token's `typ` header is present and not `logout+jwt` (an ID token or an access token offered as a
    /// logout token says `JWT` or `at+jwt`).
    public static let tokenType = IDTokenCheck("tokenType")
    /// A logout token's `events` is not an object with the member
    /// `http://schemas.openid.net/event/backchannel-logout` whose value is an object.
    public static let logoutEvent = IDTokenCheck("logoutEvent")
    /// A logout token names neither a `sub` nor a `sid` (each, when present, a non-empty string).
    public static let subjectOrSession = IDTokenCheck("subjectOrSession")
    /// A logout token has no `jti` string of 1 to 255 bytes.
    public static let tokenID = IDTokenCheck("tokenID")
    /// A logout token's `jti` was accepted before: a replay. A logout token naming only `sub` replayed later would
    /// end a session the user started after it.
    public static let replay = IDTokenCheck("replay")

    /// The check's name.
    public var description: String { name }
}
