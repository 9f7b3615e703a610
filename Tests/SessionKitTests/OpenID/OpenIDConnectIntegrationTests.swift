import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// OpenID Connect against django-oauth-toolkit with OIDC on: discovery, an RS256 ID token whose signature is
/// checked with the key from the server's JWKS, the nonce, the account from validated claims, refreshes that keep
/// naming the same user, the device grant, RP-initiated logout ending the user's tokens there, and revocation at the
/// endpoint the server names only in its RFC 8414 metadata.
@Suite(
    .timeLimit(.minutes(TimeLimit.heavy)),
    .enabled(
        if: AuthorizationServerFixture.shouldRun,
        "no authorization server: run scripts/test, which starts django-oauth-toolkit on loopback"
    )
)
struct OpenIDConnectIntegrationTests {
    typealias Fixture = AuthorizationServerFixture
    static let codeClientID = "oidc-client"
    static let deviceClientID = "oidc-device-client"
    static let postLogoutRedirectURI = "http://127.0.0.1/signed-out"

    static func provider(_ server: Fixture, clientID: String = codeClientID) -> OpenIDProvider {
        // django-oauth-toolkit's discovery document names no device authorization endpoint; the client names it.
        OpenIDProvider(
            configuration: .init(
                issuer: server.url("/o"), clientID: clientID,
                deviceAuthorizationEndpoint: server.url("/o/device-authorization/")))
    }

    /// Signs `user` in through the browser the test plays, as a command-line app would.
    static func signIn(
        _ provider: OpenIDProvider, _ server: Fixture, as user: String,
        tamper: @escaping @Sendable (URL) -> URL = { $0 }
    ) async throws -> OpenIDSignIn {
        try await provider.authorizeInBrowser(scope: "openid profile email read") { url in
            let callback = try await server.followAuthorization(tamper(url), as: user)
            let browser = URLSession(configuration: .ephemeral)
            defer { browser.finishTasksAndInvalidate() }
            _ = try? await browser.data(for: URLRequest(url: callback))
        }
    }

    @Test func discoveryNamesTheServersEndpointsAndItsIssuerExactly() async throws {
        let server = try Fixture.required()
        let metadata = try await Self.provider(server).metadata()
        #expect(metadata.issuer == server.url("/o").absoluteString)
        #expect(metadata.tokenEndpoint.absoluteString == server.url("/o/token/").absoluteString)
        #expect(metadata.keySetURL.absoluteString == server.url("/o/.well-known/jwks.json").absoluteString)
        #expect(metadata.endSessionEndpoint != nil)
        #expect(metadata.idTokenSigningAlgorithms.contains("RS256"))
        // Asked for with another spelling of the same issuer, the document is refused: issuers compare exactly.
        let slash = OpenIDProvider(
            configuration: .init(issuer: URL(string: server.url("/o").absoluteString + "/")!, clientID: "x"))
        let error = await #expect(throws: SessionError.self) { _ = try await slash.metadata() }
        #expect(error?.code == .providerMetadataRejected)
    }

    @Test func aCodeSignInWithANonceGivesAnAccountFromTheValidatedRS256Token() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let provider = Self.provider(server)
        let signIn = try await Self.signIn(provider, server, as: user.username)
        #expect(signIn.account.issuer == server.url("/o").absoluteString)
        #expect(!signIn.account.subject.isEmpty)
        #expect(signIn.claims.audiences == [Self.codeClientID])
        #expect(try await server.me(accessToken: signIn.tokens.accessToken).status == 200)
        // The ID token was RS256, signed with the key the JWKS published: validating it again needs no new fetch.
        let header = try #require(signIn.tokens.idToken?.split(separator: ".").first)
        #expect(String(decoding: Data(base64URL: String(header)) ?? Data(), as: UTF8.self).contains("RS256"))
    }

    @Test func aChangedNonceIsRefusedAndNobodyIsSignedIn() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let provider = Self.provider(server)
        let error = await #expect(throws: SessionError.self) {
            _ = try await Self.signIn(provider, server, as: user.username) { url in
                // An attacker's authorization request, replayed with its own nonce: the token echoes that one.
                var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
                components.queryItems = components.queryItems?.map {
                    $0.name == "nonce" ? URLQueryItem(name: "nonce", value: "attacker-nonce") : $0
                }
                return components.url!
            }
        }
        #expect(error?.code == .idTokenRejected)
        #expect(error?.idTokenCheck == .nonce)
    }

    @Test func aTokenForAnotherClientIsRefusedForItsAudience() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let signIn = try await Self.signIn(Self.provider(server), server, as: user.username)
        let other = Self.provider(server, clientID: Self.deviceClientID)
        let error = await #expect(throws: SessionError.self) {
            _ = try await other.validate(idToken: signIn.tokens.idToken ?? "", nonce: nil, accessToken: nil)
        }
        #expect(error?.idTokenCheck == .audience)
    }

    @Test func refreshesThroughTheManagerValidateTheSameUser() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let provider = Self.provider(server)
        let signIn = try await Self.signIn(provider, server, as: user.username)
        let manager = SessionManager(
            configuration: .init(store: InMemoryCredentialStore(), providers: [Provider(id: "dot", openID: provider)]))
        let session = try await manager.signIn(signIn.account, tokens: signIn.tokens, through: "dot")
        try await session.refreshTokens()
        let refreshed = try #require(session.tokens?.accessToken)
        #expect(refreshed != signIn.tokens.accessToken)
        #expect(manager.state == .active(signIn.account, offline: false))
        #expect(try await server.me(accessToken: refreshed).status == 200)
    }

    @Test func theDeviceGrantGivesAValidatedAccount() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let provider = Self.provider(server, clientID: Self.deviceClientID)
        let authorization = try await provider.startDeviceAuthorization(scope: "openid profile read")
        try await server.approveDevice(userCode: authorization.userCode, username: user.username)
        let signIn = try await provider.pollDeviceAuthorization(authorization)
        #expect(signIn.account.issuer == server.url("/o").absoluteString)
        #expect(signIn.claims.audiences == [Self.deviceClientID])
        #expect(try await server.me(accessToken: signIn.tokens.accessToken).status == 200)
    }

    /// django-oauth-toolkit names its revocation endpoint in its RFC 8414 metadata only, not in its discovery
    /// document (issue 47): sign-out finds it there and revokes the refresh token with a request of its own, whether
    /// or not the provider's sign-out (which deletes the user's tokens there too) runs beside it.
    @Test(arguments: [false, true])
    func signOutRevokesTheRefreshTokenAtTheEndpointTheRFC8414MetadataNames(providerLogout: Bool) async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let provider = Self.provider(server)
        #expect(try await provider.metadata().revocationEndpoint == nil, "the discovery document names none")
        let signIn = try await Self.signIn(provider, server, as: user.username)
        let refreshToken = try #require(signIn.tokens.refreshToken)
        let manager = SessionManager(
            configuration: .init(store: InMemoryCredentialStore(), providers: [Provider(id: "dot", openID: provider)]))
        try await manager.signIn(signIn.account, tokens: signIn.tokens, through: "dot")

        let options = SignOutOptions(
            serverSteps: [.revokeRefreshToken]
                + (providerLogout
                    ? [.openID(.calling(provider, postLogoutRedirectURI: Self.postLogoutRedirectURI))] : []))
        let report = try #require(await manager.signOut(options: options))

        #expect(report.refreshTokenRevocation == .succeeded, "\(report)")
        #expect(report.providerLogout == (providerLogout ? .succeeded : .notRequested), "\(report)")
        // Its own request in the server's log. Found by its token, not its user: the provider's sign-out may have
        // deleted the token before the revocation arrived, and the log then knows no user for it.
        let revocations = try await server.log().filter { $0.path == "/o/revoke_token/" && $0.token == refreshToken }
        #expect(revocations.count == 1)
        #expect(revocations.first?.tokenTypeHint == "refresh_token")
        #expect(revocations.first?.status == 200)
        #expect(revocations.first?.clientID == Self.codeClientID)
        let refresh = try await server.refresh(refreshToken, clientID: Self.codeClientID)
        #expect(refresh.status == 400)
        #expect(refresh.string("error") == "invalid_grant")
    }

    @Test func theProvidersLogoutEndsTheUsersTokensThere() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let provider = Self.provider(server)
        let signIn = try await Self.signIn(provider, server, as: user.username)
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(),
                providers: [Provider(id: "dot", openID: provider)]))
        try await manager.signIn(signIn.account, tokens: signIn.tokens, through: "dot")

        // Revocation off: only the provider's logout can end the tokens on the server.
        let options = SignOutOptions(
            serverSteps: [.openID(.calling(provider, postLogoutRedirectURI: Self.postLogoutRedirectURI))])
        let report = try #require(await manager.signOut(options: options))

        #expect(report.providerLogout == .succeeded, "\(report)")
        #expect(try await server.me(accessToken: signIn.tokens.accessToken).status == 401)
        let refresh = await #expect(throws: SessionError.self) {
            _ = try await provider.refresh(using: signIn.tokens.refreshToken ?? "")
        }
        #expect(refresh?.code == .refreshRejected)
    }
}

extension Data {
    /// The bytes of base64url `text`, padded or not.
    init?(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }
}
