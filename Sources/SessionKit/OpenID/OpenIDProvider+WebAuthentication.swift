import Foundation
import SessionKitOAuth

/// The system's in-app browser sheet for signing in and out: `ASWebAuthenticationSession` on Apple platforms
/// (`SystemWebAuthenticationSession`), a model that plays the browser in tests.
public protocol WebAuthenticationSession: Sendable {
    /// Shows `url` and returns the URL the provider redirected to once it matched `redirectURI`.
    ///
    /// - Parameters:
    ///   - url: The authorization or end-session URL.
    ///   - redirectURI: The registered redirect URI: a custom scheme (`com.example.app:/callback`) or an `https`
    ///     URL of the app's associated domain.
    ///   - ephemeral: Whether the sheet shares no cookies with the browser, and keeps none.
    /// - Returns: The callback URL.
    /// - Throws: `SessionError(.userCancelled)` when the user closed the sheet.
    func authenticate(url: URL, redirectURI: URL, ephemeral: Bool) async throws -> URL
}

extension OpenIDProvider {
    /// Signs in with the authorization code grant, PKCE (S256) and OpenID's nonce through the system's browser sheet
    /// (RFC 8252 §7.1, §7.2), then validates the ID token: the way an iOS or macOS app signs in.
    ///
    /// Ephemeral by default: the sheet neither reads nor keeps the browser's cookies, so on a shared device the
    /// provider's session of the last person to sign in never signs the next one in as them, and signing out of
    /// the app leaves no provider session behind in the browser. An app that wants single sign-on with Safari (the
    /// user signed in at the provider once for several apps) passes `ephemeral: false`, and accepts that whoever
    /// uses the device next is signed in at the provider as that user until they sign out there
    /// (``signOut(with:idTokenHint:postLogoutRedirectURI:ephemeral:)``).
    ///
    /// Only a callback at `redirectURI` (its scheme, host, port and path) is read, and its `state` must be the
    /// request's: any other ends the sign-in with `invalidInput` and no code is exchanged. A sheet the user closes is
    /// `userCancelled`, and nothing changes: through ``SessionManager/signIn(through:makeCurrent:openID:)`` the
    /// account signed in before stays signed in and current.
    ///
    /// - Parameters:
    ///   - session: The browser sheet.
    ///   - redirectURI: The registered redirect URI.
    ///   - scope: The scope; `openid` is added when missing.
    ///   - additionalParameters: Extra parameters (`prompt`, `login_hint`, …).
    ///   - ephemeral: Whether the sheet keeps no browser session; `true` by default.
    /// - Returns: The validated sign-in.
    /// - Throws: `userCancelled`; `invalidInput` for a callback that does not answer this request; what
    ///   ``authorizationRequest(redirectURI:scope:additionalParameters:)`` and ``signIn(code:for:)`` throw.
    public func signIn(
        with session: any WebAuthenticationSession,
        redirectURI: URL,
        scope: String? = nil,
        additionalParameters: [String: String] = [:],
        ephemeral: Bool = true
    ) async throws -> OpenIDSignIn {
        let request = try await authorizationRequest(
            redirectURI: redirectURI.absoluteString, scope: scope, additionalParameters: additionalParameters)
        let callback = try await session.authenticate(url: request.url, redirectURI: redirectURI, ephemeral: ephemeral)
        try Self.requireCallback(callback, at: redirectURI)
        let code = try request.authorizationCode(from: callback, expectedIssuer: try await metadata().issuer)
        return try await signIn(code: code, for: request)
    }

    /// Signs the user out at the provider through the browser sheet, so the provider's cookie in that browser goes
    /// too (OpenID Connect RP-Initiated Logout 1.0): opens ``endSessionURL(idTokenHint:postLogoutRedirectURI:state:)``
    /// and waits for the redirect to `postLogoutRedirectURI`, whose `state` must be the one sent.
    ///
    /// Pass the `ephemeral` the sign-in used: an ephemeral sheet holds no provider session to end, and the call only
    /// tells the provider.
    ///
    /// - Parameters:
    ///   - session: The browser sheet.
    ///   - idTokenHint: The ID token the provider issued to the user.
    ///   - postLogoutRedirectURI: The registered post-logout redirect URI.
    ///   - ephemeral: Whether the sheet shares the browser's cookies; as the sign-in did.
    /// - Throws: `userCancelled`; `invalidInput` for a redirect elsewhere or with another `state`; what
    ///   ``endSessionURL(idTokenHint:postLogoutRedirectURI:state:)`` throws.
    public func signOut(
        with session: any WebAuthenticationSession, idTokenHint: String, postLogoutRedirectURI: URL,
        ephemeral: Bool = true
    ) async throws {
        let state = AuthorizationRequest.randomState()
        let url = try await endSessionURL(
            idTokenHint: idTokenHint, postLogoutRedirectURI: postLogoutRedirectURI.absoluteString, state: state)
        let callback = try await session.authenticate(
            url: url, redirectURI: postLogoutRedirectURI, ephemeral: ephemeral)
        try Self.requireCallback(callback, at: postLogoutRedirectURI)
        let returned = URLComponents(url: callback, resolvingAgainstBaseURL: false)?.queryItems?
            .filter { $0.name == "state" }.compactMap(\.value)
        guard returned == [state] else {
            throw SessionError(.invalidInput, "the provider's sign-out returned another state than the one sent")
        }
    }

    /// Refuses a callback that is not at `redirectURI`: another scheme, host, port or path.
    static func requireCallback(_ callback: URL, at redirectURI: URL) throws {
        let got = URLComponents(url: callback, resolvingAgainstBaseURL: false)
        let want = URLComponents(url: redirectURI, resolvingAgainstBaseURL: false)
        guard let got, let want, got.scheme?.lowercased() == want.scheme?.lowercased(),
            got.host?.lowercased() == want.host?.lowercased(), got.port == want.port, got.path == want.path
        else {
            throw SessionError(.invalidInput, "the browser returned to another address than the redirect URI")
        }
    }
}
