import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `MockAuthorizationServer` as an OpenID provider, driven by SessionKit's own `OpenIDProvider`: discovery, the key
/// set, ES256 ID tokens on every grant, refreshes that keep naming the same user, each tampering refused for the
/// check it breaks, and RP-initiated logout ending the user's tokens.
@Suite(.timeLimit(.minutes(1))) struct MockOpenIDProviderTests {
    static let clientID = "my-app"
    static let postLogoutRedirectURI = "http://127.0.0.1/signed-out"

    /// Runs `body` with an OpenID mock that knows alice and bob, and a provider client of it that allows ES256.
    static func withOpenIDMock<T>(
        devicePollingInterval: Duration = .seconds(5),
        _ body: (MockAuthorizationServer, OpenIDProvider) async throws -> T
    ) async throws -> T {
        try await MockAuthorizationServer.withRunning(
            configuration: .init(clientID: clientID, devicePollingInterval: devicePollingInterval, openID: true)
        ) { mock in
            try mock.addUser("alice")
            try mock.addUser("bob")
            let provider = OpenIDProvider(
                configuration: .init(
                    issuer: try #require(URL(string: mock.issuer)), clientID: clientID,
                    validation: IDTokenValidation(algorithms: [.es256])))
            return try await body(mock, provider)
        }
    }

    /// The browser's part of a code grant: `user` approves, the mock redirects to its callback, and the code
    /// comes back in the URL the browser ends on.
    static func signIn(
        _ mock: MockAuthorizationServer, _ provider: OpenIDProvider, as user: String, scope: String? = "profile"
    ) async throws -> OpenIDSignIn {
        let request = try await provider.authorizationRequest(
            redirectURI: mock.callbackURL.absoluteString, scope: scope)
        try mock.approveNextAuthorization(as: user)
        let browser = URLSession(configuration: .ephemeral)
        defer { browser.finishTasksAndInvalidate() }
        let (_, response) = try await browser.data(for: URLRequest(url: request.url))
        let callback = try #require(response.url)
        let code = try request.authorizationCode(from: callback, expectedIssuer: mock.issuer)
        return try await provider.signIn(code: code, for: request)
    }

    static func get(_ url: URL) async throws -> (Data, HTTPURLResponse) {
        let browser = URLSession(configuration: .ephemeral)
        defer { browser.finishTasksAndInvalidate() }
        let (data, response) = try await browser.data(for: URLRequest(url: url))
        return (data, try #require(response as? HTTPURLResponse))
    }

    /// ``IDTokenValidation/maximumAuthenticationAge`` is asked of the provider as `max_age`, in whole seconds rounded
    /// down (OpenID Connect Core §3.1.2.1): without it, the provider would not re-authenticate a user whose login is
    /// older, and the `auth_time` check would refuse every sign-in instead. Without the setting none is sent.
    @Test func theMaximumAuthenticationAgeIsAskedAsMaxAgeInWholeSeconds() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: Self.clientID, openID: true)) {
            mock in
            func maxAge(_ age: Duration?) async throws -> [String?] {
                let provider = OpenIDProvider(
                    configuration: .init(
                        issuer: try #require(URL(string: mock.issuer)), clientID: Self.clientID,
                        validation: IDTokenValidation(algorithms: [.es256], maximumAuthenticationAge: age)))
                let request = try await provider.authorizationRequest(redirectURI: mock.callbackURL.absoluteString)
                let items = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
                return items.filter { $0.name == "max_age" }.map(\.value)
            }
            let fractional = try await maxAge(.milliseconds(300_900))
            let zero = try await maxAge(.zero)
            let none = try await maxAge(nil)
            #expect(fractional == ["300"])
            #expect(zero == ["0"])
            #expect(none == [])
        }
    }

    // MARK: - Discovery and keys

    @Test func discoveryNamesTheMocksEndpointsUnderItsExactIssuer() async throws {
        try await Self.withOpenIDMock { mock, provider in
            let metadata = try await provider.metadata()
            #expect(metadata.issuer == mock.issuer)
            #expect(!mock.issuer.hasSuffix("/"))
            #expect(metadata.authorizationEndpoint == mock.authorizationEndpoint)
            #expect(metadata.tokenEndpoint == mock.tokenEndpoint)
            #expect(metadata.keySetURL == mock.keySetURL)
            #expect(metadata.userInfoEndpoint == mock.openIDUserInfoEndpoint)
            #expect(metadata.revocationEndpoint == mock.revocationEndpoint)
            #expect(metadata.deviceAuthorizationEndpoint == mock.deviceAuthorizationEndpoint)
            #expect(metadata.endSessionEndpoint == mock.endSessionEndpoint)
            #expect(metadata.idTokenSigningAlgorithms == ["ES256"])
            #expect(metadata.scopes.contains("openid"))
            let (_, response) = try await Self.get(mock.openIDConfigurationURL)
            #expect(response.value(forHTTPHeaderField: "Date").flatMap { HTTPDate.parse($0) } != nil)
        }
    }

    @Test func theKeySetHasOneES256KeyNamedByItsThumbprint() async throws {
        try await Self.withOpenIDMock { mock, _ in
            let (data, response) = try await Self.get(mock.keySetURL)
            #expect(response.statusCode == 200)
            let keys = try JSONWebKeySet(json: Array(data))
            #expect(keys.entries.count == 1)
            let entry = try #require(keys.entries.first)
            #expect(entry.keyID == mock.idTokenKeyID)
            #expect(entry.keyID == entry.key?.thumbprint)
            #expect(entry.keyType == "EC")
            #expect(entry.curve == "P-256")
            #expect(entry.use == "sig")
            #expect(entry.algorithm == "ES256")
        }
    }

    @Test func withoutOpenIDTheMockIsAPlainOAuthServer() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            #expect(mock.idTokenKeyID == nil)
            #expect(try await Self.get(mock.openIDConfigurationURL).1.statusCode == 404)
            #expect(try await Self.get(mock.keySetURL).1.statusCode == 404)
            #expect(try mock.issueTokens(for: "alice", scope: "openid").idToken == nil)
        }
    }

    // MARK: - Grants

    @Test func aCodeSignInGivesTheValidatedAccount() async throws {
        try await Self.withOpenIDMock { mock, provider in
            let signIn = try await Self.signIn(mock, provider, as: "alice")
            #expect(signIn.account.subject == "alice")
            #expect(signIn.account.issuer == mock.issuer)
            #expect(signIn.account.displayName == "alice")
            #expect(signIn.claims.audiences == [Self.clientID])
            #expect(signIn.claims.authenticatedAt != nil)
            #expect(signIn.claims.expiresAt.timeIntervalSince(signIn.claims.issuedAt) == 300)
            #expect(signIn.tokens.scope == "openid profile")
            // The provider's clock came from the mock's Date headers.
            #expect(provider.serverClock.measuredOffset != nil)
            // at_hash binds the ID token to this access token: with another one it is refused.
            let error = await #expect(throws: SessionError.self) {
                _ = try await provider.validate(
                    idToken: signIn.tokens.idToken ?? "", nonce: nil, accessToken: "at-alice-other")
            }
            #expect(error?.idTokenCheck == .accessTokenHash)
            var request = URLRequest(url: mock.openIDUserInfoEndpoint)
            request.setValue("Bearer \(signIn.tokens.accessToken)", forHTTPHeaderField: "Authorization")
            let (data, _) = try await URLSession.shared.data(for: request)
            #expect(String(decoding: data, as: UTF8.self) == #"{"name":"alice","sub":"alice"}"#)
        }
    }

    @Test func aRefreshThroughTheManagerKeepsValidatingTheSameUser() async throws {
        try await Self.withOpenIDMock { mock, provider in
            let signIn = try await Self.signIn(mock, provider, as: "alice")
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(), providers: [Provider(id: "mock", openID: provider)]))
            let session = try await manager.signIn(through: "mock") { signIn }
            try await session.refreshTokens()
            try await session.refreshTokens()
            let tokens = try #require(session.tokens)
            #expect(tokens.accessToken != signIn.tokens.accessToken)
            #expect(tokens.idToken != nil && tokens.idToken != signIn.tokens.idToken)
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 2)
            #expect(manager.state == .active(signIn.account, offline: false))
            // The refreshed ID token names alice, carries no nonce, and keeps the sign-in's auth_time.
            let claims = try await provider.validate(
                idToken: tokens.idToken ?? "", nonce: nil, accessToken: tokens.accessToken)
            #expect(claims.subject == "alice")
            #expect(claims.authenticatedAt == signIn.claims.authenticatedAt)
        }
    }

    @Test func thePasswordAndDeviceGrantsCarryIDTokens() async throws {
        try await Self.withOpenIDMock(devicePollingInterval: .zero) { mock, provider in
            let authorization = try await provider.startDeviceAuthorization(scope: "profile")
            try mock.approveDevice(userCode: authorization.userCode, as: "bob")
            let device = try await provider.pollDeviceAuthorization(authorization)
            #expect(device.account.subject == "bob")
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 0, "the device grant's answer had an ID token")

            var request = URLRequest(url: mock.tokenEndpoint)
            request.httpMethod = "POST"
            request.httpBody = Data(
                "grant_type=password&username=bob&password=password&scope=openid&client_id=\(Self.clientID)".utf8)
            let (data, _) = try await URLSession.shared.data(for: request)
            let body = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let idToken = try #require(body["id_token"] as? String)
            let claims = try await provider.validate(
                idToken: idToken, nonce: nil, accessToken: body["access_token"] as? String)
            #expect(claims.subject == "bob")

            let issued = try mock.issueTokens(for: "bob", scope: "openid")
            let direct = try await provider.validate(
                idToken: issued.idToken ?? "", nonce: nil, accessToken: issued.accessToken)
            #expect(direct.subject == "bob")
            #expect(try mock.issueTokens(for: "bob", scope: "profile").idToken == nil, "no openid, no ID token")
        }
    }

    /// The provider wraps its client: any grant of the client, run through ``OpenIDProvider/signIn(nonce:using:)``,
    /// is a sign-in whose account comes from the validated ID token; a tampered one is refused for the check it
    /// breaks, and an answer without an ID token (no `openid` asked) is refused, never taken on trust.
    @Test func anyGrantOfTheWrappedClientIsAValidatedSignIn() async throws {
        try await Self.withOpenIDMock(devicePollingInterval: .zero) { mock, provider in
            func deviceGrant(scope: String) async throws -> OpenIDSignIn {
                try await provider.signIn { client in
                    let authorization = try await client.startDeviceAuthorization(scope: scope)
                    try mock.approveDevice(userCode: authorization.userCode, as: "bob")
                    return try await client.pollDeviceAuthorization(authorization)
                }
            }
            let signIn = try await deviceGrant(scope: "openid profile")
            #expect(signIn.account.subject == "bob")
            #expect(signIn.account.issuer == mock.issuer)

            mock.tamperNextIDToken(.anotherAudience)
            let tampered = await #expect(throws: SessionError.self) { _ = try await deviceGrant(scope: "openid") }
            #expect(tampered?.idTokenCheck == .audience)

            let withoutOpenID = await #expect(throws: SessionError.self) { _ = try await deviceGrant(scope: "profile") }
            #expect(withoutOpenID?.code == .idTokenRejected)
            #expect(withoutOpenID?.idTokenCheck == .format)
        }
    }

    // MARK: - Tampering

    @Test(arguments: [
        (MockAuthorizationServer.IDTokenTampering.anotherNonce, IDTokenCheck.nonce),
        (.expired, .expiry),
        (.signedByAnotherKey, .signature),
        (.anotherIssuer, .issuer),
        (.anotherAudience, .audience),
    ])
    func aTamperedSignInIsRefusedForTheCheckItBreaks(
        tampering: MockAuthorizationServer.IDTokenTampering, check: IDTokenCheck
    ) async throws {
        try await Self.withOpenIDMock { mock, provider in
            mock.tamperNextIDToken(tampering)
            let error = await #expect(throws: SessionError.self) {
                _ = try await Self.signIn(mock, provider, as: "alice")
            }
            #expect(error?.code == .idTokenRejected)
            #expect(error?.idTokenCheck == check)
            // Only the next token: the one after is valid.
            let next = try await Self.signIn(mock, provider, as: "alice")
            #expect(next.account.subject == "alice")
        }
    }

    @Test func aRefreshAboutAnotherSubjectIsRefusedAndEndsTheSession() async throws {
        try await Self.withOpenIDMock { mock, provider in
            let signIn = try await Self.signIn(mock, provider, as: "alice")
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(), providers: [Provider(id: "mock", openID: provider)]))
            let session = try await manager.signIn(through: "mock") { signIn }
            mock.tamperNextIDToken(.anotherSubject)
            let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
            #expect(error?.idTokenCheck == .sameAccount)
            #expect(manager.state == .reauthenticationRequired(signIn.account))
            #expect(session.tokens?.accessToken != mock.accessTokens(issuedTo: "alice").last)
        }
    }

    @Test func aTamperedSubjectAtSignInNamesSomeoneElse() async throws {
        try await Self.withOpenIDMock { mock, provider in
            mock.tamperNextIDToken(.anotherSubject)
            let signIn = try await Self.signIn(mock, provider, as: "alice")
            #expect(signIn.account.subject == "not-alice")
        }
    }

    // MARK: - End session

    @Test func theProvidersLogoutEndsTheUsersTokensAtTheMock() async throws {
        try await Self.withOpenIDMock { mock, provider in
            let signIn = try await Self.signIn(mock, provider, as: "alice")
            let bob = try await Self.signIn(mock, provider, as: "bob")
            let refreshToken = try #require(signIn.tokens.refreshToken)
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(), providers: [Provider(id: "mock", openID: provider)]))
            try await manager.signIn(through: "mock") { signIn }

            // Revocation off: only the provider's logout can end the tokens on the server.
            let options = SignOutOptions(
                serverSteps: [.openID(.calling(provider, postLogoutRedirectURI: Self.postLogoutRedirectURI))])
            let report = try #require(await manager.signOut(options: options))

            #expect(report.providerLogout == .succeeded, "\(report)")
            #expect(!mock.isActive(token: refreshToken))
            #expect(!mock.isActive(token: signIn.tokens.accessToken))
            #expect(mock.isActive(token: bob.tokens.refreshToken ?? ""), "another user's grant is untouched")
            let ended = try #require(mock.endSessions.first)
            #expect(mock.endSessions.count == 1)
            #expect(ended.user == "alice")
            #expect(ended.postLogoutRedirectURI == Self.postLogoutRedirectURI)
            #expect(ended.state?.isEmpty == false)
        }
    }

    @Test func theEndSessionEndpointRedirectsWithStateAndRefusesWhatItDidNotIssue() async throws {
        try await Self.withOpenIDMock { mock, provider in
            let signIn = try await Self.signIn(mock, provider, as: "alice")
            let idToken = try #require(signIn.tokens.idToken)
            func endSession(_ query: String) async throws -> HTTPURLResponse {
                // The provider's own session follows no redirect, so the 302 itself is seen.
                let url = try #require(URL(string: mock.endSessionEndpoint.absoluteString + "?" + query))
                let session = URLSession(configuration: .ephemeral, delegate: NoRedirects(), delegateQueue: nil)
                defer { session.finishTasksAndInvalidate() }
                let (_, response) = try await session.data(for: URLRequest(url: url))
                return try #require(response as? HTTPURLResponse)
            }
            let redirect = "post_logout_redirect_uri=http%3A%2F%2F127.0.0.1%2Fout&state=s%201"

            // A token it never issued, a tampered one, and a client that is not the token's audience: 400.
            mock.tamperNextIDToken(.anotherNonce)
            let tampered = try await provider.refresh(using: signIn.tokens.refreshToken ?? "").idToken ?? ""
            for query in [
                "client_id=\(Self.clientID)&\(redirect)",
                "id_token_hint=eyJ.not.issued&client_id=\(Self.clientID)&\(redirect)",
                "id_token_hint=\(tampered)&client_id=\(Self.clientID)&\(redirect)",
                "id_token_hint=\(idToken)&client_id=another-app&\(redirect)",
                "id_token_hint=\(idToken)&\(redirect)",
            ] {
                #expect(try await endSession(query).statusCode == 400, "\(query.prefix(40))")
            }
            #expect(mock.endSessions.isEmpty)
            #expect(mock.endSessionRequestCount == 5)

            let response = try await endSession("id_token_hint=\(idToken)&client_id=\(Self.clientID)&\(redirect)")
            #expect(response.statusCode == 302)
            #expect(response.value(forHTTPHeaderField: "Location") == "http://127.0.0.1/out?state=s%201")
            #expect(mock.accessTokens(issuedTo: "alice").allSatisfy { !mock.isActive(token: $0) })
            #expect(
                mock.endSessions == [.init(user: "alice", postLogoutRedirectURI: "http://127.0.0.1/out", state: "s 1")])
        }
    }

    @Test func aFailureInjectedAtTheKeySetReachesTheProvider() async throws {
        try await Self.withOpenIDMock { mock, provider in
            mock.failNext(.keySet, with: .serviceUnavailable(retryAfter: nil))
            let error = await #expect(throws: SessionError.self) {
                _ = try await Self.signIn(mock, provider, as: "alice")
            }
            #expect(error?.code == .providerOutage)
            let signIn = try await Self.signIn(mock, provider, as: "alice")
            #expect(signIn.account.subject == "alice")
        }
    }
}

/// A URL session that hands back redirects instead of following them.
private final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
