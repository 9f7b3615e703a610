import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// SessionKit against a real, widely used OAuth 2.0 server that no one here wrote: django-oauth-toolkit,
/// started on loopback by `scripts/test` (see Tests/AuthorizationServer/README.md).
///
/// Under `scripts/test` the suite must run (`SESSIONKIT_REQUIRE_AUTH_SERVER=1`: a missing server fails every
/// test); under plain `swift test` without the server it is skipped. Each test creates users of its own, so
/// the request log and injected faults of one test never touch another running beside it.
@Suite(
    .timeLimit(.minutes(TimeLimit.heavy)),
    .enabled(
        if: AuthorizationServerFixture.shouldRun,
        "no authorization server: run scripts/test, which starts django-oauth-toolkit on loopback"
    )
)
struct AuthorizationServerIntegrationTests {
    typealias Fixture = AuthorizationServerFixture

    static func client(_ server: Fixture, clientID: String = Fixture.passwordClientID) -> OAuthClient {
        OAuthClient(
            configuration: OAuthClient.Configuration(
                tokenEndpoint: server.url("/o/token/"),
                revocationEndpoint: server.url("/o/revoke_token/"),
                deviceAuthorizationEndpoint: server.url("/o/device-authorization/"),
                authorizationEndpoint: server.url("/o/authorize/"),
                clientID: clientID
            )
        )
    }

    static func account(_ server: Fixture, _ user: Fixture.User) -> Account {
        Account(issuer: server.baseURL.absoluteString, subject: user.username)
    }

    static func me(_ server: Fixture) -> URLRequest { URLRequest(url: server.url("/api/me")) }

    static func username(_ data: Data) -> String? {
        (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["username"] as? String
    }

    @Test func passwordGrantThenRequestsThroughAUserSession() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server)
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore(), tokenEndpoint: oauth))
        let session = try await manager.signIn { [account = Self.account(server, user)] in
            (account, try await oauth.password(username: user.username, password: user.password))
        }
        let (data, response) = try await session.data(for: Self.me(server))
        #expect(response.statusCode == 200)
        #expect(Self.username(data) == user.username)
        #expect(response.value(forHTTPHeaderField: "Cache-Control") == "max-age=60")
        // The second read is a fresh hit in the session's own cache: no second request reaches the server.
        _ = try await session.data(for: Self.me(server))
        let log = try await server.log(username: user.username).filter { $0.path == "/api/me" }
        #expect(log.count == 1)
        await manager.signOut()
    }

    @Test func authorizationCodeWithPKCEDrivenProgrammatically() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server, clientID: Fixture.pkceClientID)
        let authorization = try oauth.authorizationRequest(redirectURI: Fixture.redirectURI.absoluteString)
        let code = try await server.authorizationCode(
            for: user.username,
            pkceChallenge: authorization.pkce.challenge,
            state: authorization.state
        )
        let tokens = try await oauth.exchange(code: code, for: authorization)
        let session = UserSession(account: Self.account(server, user), tokens: tokens, tokenEndpoint: oauth)
        let (data, _) = try await session.data(for: Self.me(server))
        #expect(Self.username(data) == user.username)
        // A code exchanged with another request's verifier is refused.
        let other = try oauth.authorizationRequest(redirectURI: Fixture.redirectURI.absoluteString)
        let second = try await server.authorizationCode(
            for: user.username,
            pkceChallenge: other.pkce.challenge,
            state: other.state
        )
        await #expect(throws: SessionError.self) {
            try await oauth.exchange(code: second, for: authorization)
        }
        session.end()
    }

    @Test func deviceGrantWithAScriptedApproval() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server, clientID: Fixture.deviceClientID)
        let device = try await oauth.startDeviceAuthorization()
        let polling = Task { try await oauth.pollDeviceAuthorization(device) }
        try await server.approveDevice(userCode: device.userCode, username: user.username)
        let tokens = try await polling.value
        let session = UserSession(account: Self.account(server, user), tokens: tokens)
        let (data, _) = try await session.data(for: Self.me(server))
        #expect(Self.username(data) == user.username)
        session.end()
    }

    @Test func reactiveRefreshRotatesAndTheOldRefreshTokenIsRejected() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server)
        let store: any CredentialStore = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth))
        let session = try await manager.signIn { [account = Self.account(server, user)] in
            (account, try await oauth.password(username: user.username, password: user.password))
        }
        let before = try #require(session.tokens)
        try await server.expireAccessToken(before.accessToken)
        var request = Self.me(server)
        request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
        let (data, _) = try await session.data(for: request)
        #expect(Self.username(data) == user.username)
        let after = try #require(session.tokens)
        #expect(after.accessToken != before.accessToken)
        #expect(after.refreshToken != before.refreshToken)
        #expect(try await manager.vault.load(for: session.account)?.refreshToken == after.refreshToken)
        // The rotated-out refresh token no longer works at the server.
        let replay = try await server.refresh(try #require(before.refreshToken))
        #expect(replay.status == 400)
        #expect(replay.string("error") == "invalid_grant")
        await manager.signOut()
    }

    @Test func proactiveRefreshBeforeExpiry() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server)
        // The server grants ~10 h; a minute before expiry (inside the 60 s leeway, capped at half the lifetime),
        // the next request refreshes first.
        let clock = ManualClock()
        let granted = try await oauth.password(username: user.username, password: user.password)
        let lifetime = try #require(granted.lifetime)
        let session = UserSession(
            account: Self.account(server, user),
            tokens: granted,
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: oauth,
            refreshPolicy: RefreshPolicy(jitter: .zero)
        )
        let first = try #require(session.tokens?.accessToken)
        clock.advance(by: lifetime - .seconds(59))
        _ = try await session.data(for: Self.me(server))
        let log = try await server.log(username: user.username)
        #expect(log.filter { $0.grantType == "refresh_token" }.count == 1)
        #expect(log.filter { $0.path == "/api/me" }.allSatisfy { $0.bearerToken != first && $0.status == 200 })
        session.end()
    }

    /// Measured on this server: 20 uncoordinated concurrent refreshes with reuse protection on revoke the
    /// whole family and sign the user out. Through one UserSession, exactly one refresh reaches the server.
    @Test func sixtyFourConcurrentRequestsWithReuseProtectionMakeOneRefresh() async throws {
        try await Fixture.withPrivateServer(settings: [
            "ROTATE_REFRESH_TOKEN": "True", "REFRESH_TOKEN_REUSE_PROTECTION": "True",
        ]) { server in
            let user = try await server.createUser()
            let oauth = Self.client(server)
            let session = UserSession(
                account: Self.account(server, user),
                tokens: try await oauth.password(username: user.username, password: user.password),
                tokenEndpoint: oauth
            )
            try await server.expireAccessToken(try #require(session.tokens?.accessToken))
            let names = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<64 {
                    group.addTask {
                        var request = Self.me(server)
                        request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
                        return Self.username(try await session.data(for: request).0)
                    }
                }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(names.count == 64)
            #expect(names.allSatisfy { $0 == user.username }, "alice stays signed in")
            let refreshes = try await server.log(username: user.username).filter { $0.grantType == "refresh_token" }
            #expect(refreshes.count == 1)
            session.end()
        }
    }

    /// Issue 17 against this server: four processes on one store opened as Getting Started opens it (coordinating by
    /// default, issue 35), each firing 16 requests that all get 401, with rotation and reuse protection on. Exactly
    /// one refresh reaches the server, no refresh token is presented twice, and every request succeeds.
    @Test func fourProcessesOnOneStoreMakeOneRefreshWithReuseProtection() async throws {
        let executable = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
        try await Fixture.withPrivateServer(settings: [
            "ROTATE_REFRESH_TOKEN": "True", "REFRESH_TOKEN_REUSE_PROTECTION": "True",
        ]) { server in
            try await TemporaryDirectory.with { root in
                let user = try await server.createUser()
                let oauth = Self.client(server)
                let directory = root.appendingPathComponent("credentials")
                let store = try FileCredentialStore(directory: directory)
                let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth))
                let session = try await manager.signIn { [account = Self.account(server, user)] in
                    (account, try await oauth.password(username: user.username, password: user.password))
                }
                let expired = try #require(session.tokens?.accessToken)
                try await server.expireAccessToken(expired)
                session.end()

                let burst = try await RefreshBurst.start(
                    executable, count: 4, directory: directory, tokenEndpoint: server.url("/o/token/"),
                    clientID: Fixture.passwordClientID, resource: server.url("/api/me"), requests: 16)
                burst.go()
                let outcomes = await burst.outcomes()

                for (index, outcome) in outcomes.enumerated() {
                    #expect(outcome.status == 0, "child \(index) exited with \(outcome.status)")
                    #expect(outcome.done?.succeeded == 16, "child \(index): \(outcome.lines)")
                }
                let log = try await server.log(username: user.username)
                let refreshes = log.filter { $0.grantType == "refresh_token" }
                #expect(refreshes.count == 1)
                let presented = refreshes.compactMap(\.refreshToken)
                #expect(Set(presented).count == presented.count, "a refresh token was presented twice")
                // Every request was sent first with the expired token (the server no longer knows whose it is once
                // the refresh has replaced it, so these are found by the token, not the user).
                let rejected = try await server.log().filter { $0.path == "/api/me" && $0.bearerToken == expired }
                #expect(rejected.count == 64 && rejected.allSatisfy { $0.status == 401 }, "all 64 got 401 first")
                let stored = try #require(try await store.load(for: Self.account(server, user))?.refreshToken)
                #expect(try await server.refresh(stored).status == 200, "the stored refresh token is not usable")
            }
        }
    }

    /// OWASP MASTG's logout test: after sign-out with revocation, the old access token and the old refresh
    /// token are both rejected by the server.
    @Test func signOutRevokesBothTokensAtTheServer() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server)
        let store: any CredentialStore = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth, revoker: oauth))
        let session = try await manager.signIn { [account = Self.account(server, user)] in
            (account, try await oauth.password(username: user.username, password: user.password))
        }
        let tokens = try #require(session.tokens)
        let report = try #require(await manager.signOut())
        #expect(report.refreshTokenRevocation == .succeeded)
        #expect(try await server.me(accessToken: tokens.accessToken).status == 401)
        let refresh = try await server.refresh(try #require(tokens.refreshToken))
        #expect(refresh.status == 400)
        #expect(try await store.accounts().isEmpty)
    }

    /// The article's exercise against the real server: a refresh held in flight at sign-out.
    @Test func refreshInFlightAtSignOutIsNeverStoredOrUsed() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server)
        let store: any CredentialStore = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth))
        let session = try await manager.signIn { [account = Self.account(server, user)] in
            (account, try await oauth.password(username: user.username, password: user.password))
        }
        let original = try #require(session.tokens?.accessToken)
        // The server rotates at once, then holds its answer for a second and a half.
        try await server.control(Fixture.Control(username: user.username, tokenDelayMilliseconds: 1500))
        let refresh = Task { try await session.refreshTokens() }
        // The refresh is in flight (the server logs a request only once it has answered, so watch the state).
        await eventually { manager.state == .refreshing(session.account) }
        await manager.signOut(options: .localOnly)
        await #expect(throws: SessionError.self) { try await refresh.value }
        #expect(try await store.load(for: session.account) == nil)
        #expect(session.tokens == nil)
        // Nothing reached /api/ with any token but the original one.
        let log = try await server.log(username: user.username).filter { $0.path.hasPrefix("/api/") }
        #expect(log.allSatisfy { $0.bearerToken == original })
    }

    @Test func offlineSignOutStillCompletesLocallyWithinItsBound() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server)
        // The revocation endpoint is a port where nothing listens any more: the device is offline.
        let gone = try await LocalServer.start()
        let offline = OAuthClient(
            configuration: .init(
                tokenEndpoint: gone.url("/o/token/"),
                revocationEndpoint: gone.url("/o/revoke_token/"),
                clientID: Fixture.passwordClientID
            )
        )
        await gone.stop()
        let store: any CredentialStore = InMemoryCredentialStore()
        let root = try temporaryDirectory()
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: oauth, revoker: offline, dataDirectory: root)
        )
        let session = try await manager.signIn { [account = Self.account(server, user)] in
            (account, try await oauth.password(username: user.username, password: user.password))
        }
        let directory = try #require(manager.directory(for: session.account))
        try Data("cache".utf8).write(to: directory.appendingPathComponent("profile.json"))
        let report = try #require(await manager.signOut(options: SignOutOptions(serverTimeout: .seconds(5))))
        #expect(report.refreshTokenRevocation != .succeeded)
        #expect(try await store.accounts().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: directory.path))
        #expect(manager.sessions.isEmpty)
    }

    @Test func twoAccountsAtOnceEachRequestCarriesItsOwnSessionsToken() async throws {
        let server = try Fixture.required()
        let (first, second) = (try await server.createUser(), try await server.createUser())
        let oauth = Self.client(server)
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore(), tokenEndpoint: oauth))
        let a = try await manager.signIn { [account = Self.account(server, first)] in
            (account, try await oauth.password(username: first.username, password: first.password))
        }
        let b = try await manager.signIn(makeCurrent: false) { [account = Self.account(server, second)] in
            (account, try await oauth.password(username: second.username, password: second.password))
        }
        let tokenOf = [
            first.username: try #require(a.tokens?.accessToken), second.username: try #require(b.tokens?.accessToken),
        ]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (session, expected) in [(a, first.username), (b, second.username)] {
                for _ in 0..<10 {
                    group.addTask {
                        var request = Self.me(server)
                        request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
                        let (data, _) = try await session.data(for: request)
                        #expect(Self.username(data) == expected)
                    }
                }
            }
            try await group.waitForAll()
        }
        for user in [first, second] {
            let log = try await server.log(username: user.username).filter { $0.path == "/api/me" }
            #expect(log.count == 10)
            #expect(log.allSatisfy { $0.bearerToken == tokenOf[user.username] })
        }
        await manager.signOut(a, options: .localOnly)
        await manager.signOut(b, options: .localOnly)
    }

    /// A kill in the middle of a refresh, emulated by dropping the refresh response after the server rotated:
    /// the next refresh presents the old refresh token, gets invalid_grant, and the state becomes
    /// re-authentication required, once, with no loop.
    @Test func killMidRefreshLeadsToOneCleanReauthentication() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server)
        let store: any CredentialStore = InMemoryCredentialStore()
        let manager = SessionManager(
            configuration: .init(
                store: store,
                tokenEndpoint: oauth,
                refreshPolicy: RefreshPolicy(retryPolicy: .never)
            )
        )
        let account = Self.account(server, user)
        let session = try await manager.signIn { [account] in
            (account, try await oauth.password(username: user.username, password: user.password))
        }
        try await server.control(Fixture.Control(username: user.username, dropNextTokenResponse: true))
        await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(manager.state.account == account, "a lost response signs no one out")
        let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(error?.code == .refreshRejected)
        #expect(manager.state == .reauthenticationRequired(account))
        #expect(try await store.load(for: account) == nil)
        let refreshes = try await server.log(username: user.username).filter { $0.grantType == "refresh_token" }
        #expect(refreshes.count == 2, "no loop")
    }
}
