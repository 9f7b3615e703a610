import Foundation

extension OpenIDProvider {
    /// Validates a logout token the provider sent to this client's back-channel logout endpoint (OpenID Connect
    /// Back-Channel Logout 1.0 §2.6): the checks of `LogoutTokenValidator`, with the key set fetched as for an ID
    /// token, times on the provider's clock, and its `jti` refused if this provider object accepted it before.
    ///
    /// Apps call ``SessionManager/receiveBackChannelLogout(_:from:)``, which validates with this and ends the sessions
    /// the token names.
    ///
    /// - Parameter logoutToken: The `logout_token` form parameter of the provider's POST.
    /// - Returns: The validated claims.
    /// - Throws: `SessionError(.logoutTokenRejected)` naming the failed check in ``SessionError/idTokenCheck``
    ///   (``IDTokenCheck/replay`` for a `jti` seen before), or what fetching the metadata and keys throws.
    public func validate(logoutToken: String) async throws -> LogoutTokenClaims {
        let validator = LogoutTokenValidator(
            issuer: try await metadata().issuer, clientID: configuration.clientID, validation: configuration.validation,
            maximumAge: configuration.logoutTokenMaximumAge)
        let unknownKey = LogoutTokenValidator.refusal(.key, "names a \"kid\" the provider's key set does not have")
        guard let cached = try await keySet(refetch: false) else { throw unknownKey }
        var now = serverClock.now(wallNow: configuration.clock.wallNow)
        var outcome = try validator.validate(logoutToken, keys: cached, now: now)
        if case .needsKeys = outcome {
            guard let fresh = try await keySet(refetch: true) else { throw unknownKey }
            now = serverClock.now(wallNow: configuration.clock.wallNow)
            outcome = try validator.validate(logoutToken, keys: fresh, now: now)
        }
        guard case .valid(let claims) = outcome else { throw unknownKey }
        guard await logoutReplay.admit(claims.tokenID, until: validator.retention(of: claims), now: now) else {
            throw LogoutTokenValidator.refusal(.replay, "has a \"jti\" that was accepted before: a replay")
        }
        return claims
    }
}
