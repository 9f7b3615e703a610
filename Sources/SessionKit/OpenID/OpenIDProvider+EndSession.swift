import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension OpenIDProvider {
    /// The URL that signs the user out at the provider (OpenID Connect RP-Initiated Logout 1.0 §2): the
    /// `end_session_endpoint` with `id_token_hint`, `client_id`, and `post_logout_redirect_uri` and `state` when
    /// given. An app opens it in the browser the user signed in with (`ASWebAuthenticationSession`), so the
    /// provider's cookie goes too; a command-line tool can call it (``OpenIDLogout/calling(_:postLogoutRedirectURI:)``).
    ///
    /// - Parameters:
    ///   - idTokenHint: The ID token the provider issued to the user signing out.
    ///   - postLogoutRedirectURI: Where the provider sends the browser afterwards, as registered; `nil` for none.
    ///   - state: An opaque value the provider returns on that redirect; `nil` for none.
    /// - Returns: The URL. It carries the ID token: do not log it.
    /// - Throws: `providerMetadataRejected` when the provider has no `end_session_endpoint`, and what
    ///   ``OpenIDProvider/client()`` throws when the discovery document cannot be read.
    public func endSessionURL(idTokenHint: String, postLogoutRedirectURI: String?, state: String?) async throws -> URL {
        guard let endpoint = try await metadata().endSessionEndpoint else {
            throw SessionError(.providerMetadataRejected, "the provider has no end_session_endpoint")
        }
        var pairs: [(name: String, value: String)] = [
            ("id_token_hint", idTokenHint), ("client_id", configuration.clientID),
        ]
        if let postLogoutRedirectURI { pairs.append(("post_logout_redirect_uri", postLogoutRedirectURI)) }
        if let state { pairs.append(("state", state)) }
        guard var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false) else {
            throw SessionError(.providerMetadataRejected, "the end_session_endpoint is not a valid URL")
        }
        let encoded = FormURLEncoding.encode(pairs)
        components.percentEncodedQuery = components.percentEncodedQuery.map { $0 + "&" + encoded } ?? encoded
        guard let url = components.url else {
            throw SessionError(.providerMetadataRejected, "the end-session URL could not be built")
        }
        return url
    }
}

/// The provider's sign-out as a step of ``SessionManager/signOut(_:options:)`` (OpenID Connect RP-Initiated
/// Logout 1.0), reported in ``SignOutReport/providerLogout``.
///
/// The step builds the end-session URL with the session's ID token as `id_token_hint` and a fresh `state`, and
/// hands it to ``deliver``: an app opens it in its browser; a command-line tool calls it with
/// ``calling(_:postLogoutRedirectURI:)``. A session without an ID token (one restored without
/// ``UserSession/Configuration/storesIDToken``) reports the step failed with `invalidInput`.
public struct OpenIDLogout: Sendable {
    /// The provider to sign out of.
    public var provider: OpenIDProvider
    /// The registered post-logout redirect URI, or `nil`.
    public var postLogoutRedirectURI: String?
    /// Takes the end-session URL to the provider; its error fails the step.
    public var deliver: @Sendable (_ endSessionURL: URL) async throws -> Void

    /// Creates the step.
    ///
    /// - Parameters:
    ///   - provider: The provider.
    ///   - postLogoutRedirectURI: The registered post-logout redirect URI, or `nil`.
    ///   - deliver: Opens the URL in the browser (or otherwise takes it to the provider).
    public init(
        provider: OpenIDProvider, postLogoutRedirectURI: String?,
        deliver: @escaping @Sendable (_ endSessionURL: URL) async throws -> Void
    ) {
        self.provider = provider
        self.postLogoutRedirectURI = postLogoutRedirectURI
        self.deliver = deliver
    }

    /// The step for a program without a browser: it calls the end-session URL itself on a session of its own
    /// (no cookies, no cache, no redirect followed). It succeeds when the provider answers with a redirect to the
    /// post-logout URI (or any 2xx or 3xx when none is given), and fails with `authorizationFailed` otherwise (a
    /// provider that asks the user to confirm answers with a page, and has not signed anyone out).
    ///
    /// - Parameters:
    ///   - provider: The provider.
    ///   - postLogoutRedirectURI: The registered post-logout redirect URI, or `nil`.
    /// - Returns: The step.
    public static func calling(_ provider: OpenIDProvider, postLogoutRedirectURI: String?) -> OpenIDLogout {
        OpenIDLogout(provider: provider, postLogoutRedirectURI: postLogoutRedirectURI) { url in
            let answer = try await provider.call(url)
            let signedOut: Bool
            if let expected = postLogoutRedirectURI {
                let target = answer.location.map { $0.split(separator: "?", maxSplits: 1).first.map(String.init) }
                signedOut = (300...399).contains(answer.status) && target == expected
            } else {
                signedOut = (200...399).contains(answer.status)
            }
            guard signedOut else {
                throw SessionError(
                    .authorizationFailed, "the end-session endpoint answered \(answer.status) without signing out",
                    statusCode: answer.status)
            }
        }
    }

    /// Runs the step for a session that held `idToken`.
    func run(idToken: String?) async throws {
        guard let idToken else {
            throw SessionError(.invalidInput, "the session holds no ID token to name the user at the provider")
        }
        let url = try await provider.endSessionURL(
            idTokenHint: idToken, postLogoutRedirectURI: postLogoutRedirectURI,
            state: AuthorizationRequest.randomState())
        try await deliver(url)
    }
}

extension OpenIDProvider {
    /// GETs `url` on the provider's own session, which follows no redirect.
    func call(_ url: URL) async throws -> (status: Int, location: String?) {
        var request = URLRequest(url: url)
        request.httpMethod = "GET"
        let answer = try await transport.send(request, to: "the end-session endpoint")
        return (answer.statusCode, answer.location)
    }
}
