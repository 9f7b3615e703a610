/// The rules an ID token is validated by, beyond the ones that always apply (OpenID Connect Core §3.1.3.7).
///
/// Always: a compact JWS with a signature by the provider's key for its `kid`; `iss` exactly the provider's issuer;
/// `aud` containing the client ID, and `azp` the client ID when present or when there are several audiences; `exp`
/// ahead and `nbf` and `iat` not ahead on the provider's clock, within ``leeway``; the nonce the authorization request
/// sent; `at_hash` matching the access token when the token has one.
public struct IDTokenValidation: Sendable, Hashable {
    /// The signature algorithms accepted; `RS256` (the one every provider must support, OpenID Connect Core §15.1) by
    /// default. `none` and HMAC algorithms are never accepted: a public client has no secret to check an HMAC with,
    /// and an HMAC keyed with the provider's public key is a forgery anyone can make.
    public var algorithms: Set<SignatureAlgorithm>
    /// How far the token's times may disagree with the provider's clock: one minute by default. The provider's clock
    /// is this device's wall clock corrected by the offset its `Date` header showed, so a device clock set wrong
    /// neither rejects a fresh token nor accepts an expired one; the leeway covers the `Date` header's one-second
    /// resolution and the time the answer took to arrive.
    public var leeway: Duration
    /// The `max_age` the authorization request sent, if any: the token must then carry an `auth_time` no older than
    /// this (OpenID Connect Core §3.1.2.1).
    public var maximumAuthenticationAge: Duration?

    /// Creates rules.
    ///
    /// - Parameters:
    ///   - algorithms: The accepted signature algorithms; `RS256` by default.
    ///   - leeway: The allowed disagreement of times; one minute by default.
    ///   - maximumAuthenticationAge: The `max_age` asked, if any.
    public init(
        algorithms: Set<SignatureAlgorithm> = [.rs256],
        leeway: Duration = .seconds(60),
        maximumAuthenticationAge: Duration? = nil
    ) {
        self.algorithms = algorithms
        self.leeway = leeway
        self.maximumAuthenticationAge = maximumAuthenticationAge
    }
}
