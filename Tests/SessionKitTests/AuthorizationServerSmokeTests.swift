import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Proves the fixture drives the real authorization server, and pins the server behaviour SessionKit's
/// integration tests are written against (Tests/AuthorizationServer/README.md lists it all).
///
/// The server exists only when `scripts/test` (or `scripts/auth-server start` and the exports it prints about)
/// started it. Without it, and without `SESSIONKIT_REQUIRE_AUTH_SERVER=1`, the suite is skipped with the reason
/// below; with that variable set, every test fails on the missing server instead of passing silently.
@Suite(
    .timeLimit(.minutes(TimeLimit.heavy)),
    .enabled(
        if: AuthorizationServerFixture.shouldRun,
        "no authorization server: scripts/test starts one and sets SESSIONKIT_AUTH_SERVER_URL"))
struct AuthorizationServerSmokeTests {
    private typealias Fixture = AuthorizationServerFixture

    @Test func passwordGrantTokenReadsTheProtectedResource() async throws {
        let server = try Fixture.required()
        let tokens = try await server.passwordGrant(Fixture.alice)
        #expect(tokens.refresh != nil)
        #expect(tokens.expiresIn == 3600)

        let response = try await server.me(accessToken: tokens.access)
        #expect(response.status == 200)
        #expect(response.string("username") == "alice")
        #expect(response.header("Cache-Control") == "max-age=60")
        #expect(response.header("Vary") == nil)
    }

    @Test func unknownTokenIsChallengedWithInvalidToken() async throws {
        let server = try Fixture.required()
        let response = try await server.me(accessToken: "not-a-token")
        #expect(response.status == 401)
        #expect(response.header("WWW-Authenticate")?.hasPrefix("Bearer error=\"invalid_token\"") == true)
    }

    @Test func expiredTokenIsChallengedWithInvalidTokenAndStillRefreshes() async throws {
        let server = try Fixture.required()
        let tokens = try await server.passwordGrant(Fixture.alice)
        try await server.expireAccessToken(tokens.access)

        let response = try await server.me(accessToken: tokens.access)
        #expect(response.status == 401)
        #expect(response.header("WWW-Authenticate")?.hasPrefix("Bearer error=\"invalid_token\"") == true)
        let refreshed = try await server.refresh(try #require(tokens.refresh))
        #expect(refreshed.status == 200)
    }

    @Test func tokenEndpointForbidsCachingOfAnswersAndErrors() async throws {
        let server = try Fixture.required()
        let success = try await server.tokenRequest([
            "grant_type": "password", "client_id": Fixture.passwordClientID, "username": "alice",
            "password": "alice-password",
        ])
        #expect(success.status == 200)
        #expect(success.header("Cache-Control") == "no-store")
        #expect(success.header("Pragma") == "no-cache")

        let failure = try await server.refresh("not-a-refresh-token")
        #expect(failure.status == 400)
        #expect(failure.string("error") == "invalid_grant")
        #expect(failure.header("Cache-Control") == "no-store")
    }

    @Test func refreshRotatesBothTokensAndKillsTheOldAccessTokenAtOnce() async throws {
        let server = try Fixture.required()
        let first = try await server.passwordGrant(Fixture.alice)
        let oldRefresh = try #require(first.refresh)

        let response = try await server.refresh(oldRefresh)
        #expect(response.status == 200)
        let newAccess = try #require(response.string("access_token"))
        let newRefresh = try #require(response.string("refresh_token"))
        #expect(newAccess != first.access)
        #expect(newRefresh != oldRefresh)

        #expect(try await server.me(accessToken: first.access).status == 401)
        #expect(try await server.me(accessToken: newAccess).status == 200)
        let replay = try await server.refresh(oldRefresh)
        #expect(replay.status == 400)
        #expect(replay.string("error") == "invalid_grant")
    }

    @Test func revokingAnUnknownTokenSucceeds() async throws {
        let server = try Fixture.required()
        let response = try await server.revoke("never-issued", hint: "refresh_token")
        #expect(response.status == 200)
        #expect(response.body.isEmpty)
    }

    @Test func revokingTheRefreshTokenKillsItsAccessToken() async throws {
        let server = try Fixture.required()
        let tokens = try await server.passwordGrant(Fixture.alice)
        let refresh = try #require(tokens.refresh)

        #expect(try await server.revoke(refresh, hint: "refresh_token").status == 200)
        #expect(try await server.me(accessToken: tokens.access).status == 401)
        #expect(try await server.refresh(refresh).string("error") == "invalid_grant")
    }

    @Test func logRecordsTheTokensEachRequestPresented() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let tokens = try await server.passwordGrant(user)
        let refresh = try #require(tokens.refresh)
        _ = try await server.me(accessToken: tokens.access)
        _ = try await server.refresh(refresh)

        let entries = try await server.log(username: user.username)
        #expect(entries.map(\.path) == ["/o/token/", "/api/me", "/o/token/"])
        #expect(entries.map(\.grantType) == ["password", nil, "refresh_token"])
        #expect(entries[1].bearerToken == tokens.access)
        #expect(entries[2].refreshToken == refresh)
        #expect(entries.map(\.status) == [200, 200, 200])
        #expect(entries.map(\.seq) == entries.map(\.seq).sorted())

        try await server.clearLog(username: user.username)
        #expect(try await server.log(username: user.username).isEmpty)
    }

    @Test func droppedTokenResponseRotatesOnTheServerButNeverArrives() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let tokens = try await server.passwordGrant(user)
        let refresh = try #require(tokens.refresh)
        try await server.control(.init(username: user.username, dropNextTokenResponse: true))

        // The connection closes with no response: URLSession reports a transport error, not a status. On Linux
        // (libcurl) it is "Empty reply from server", badServerResponse; Apple's stack reports a lost connection.
        let error = await #expect(throws: URLError.self) { _ = try await server.refresh(refresh) }
        #expect(error.map { [.badServerResponse, .networkConnectionLost].contains($0.code) } == true)

        let last = try #require(try await server.log(username: user.username).last)
        #expect(last.path == "/o/token/")
        #expect(last.status == 200)
        #expect(last.dropped)
        #expect(try await server.refresh(refresh).string("error") == "invalid_grant")
        #expect(try await server.me(accessToken: tokens.access).status == 401)
    }

    @Test func deviceAuthorizationStaysPendingWithoutSlowDownUntilApproved() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let authorization = try await server.deviceAuthorization()
        #expect(authorization.status == 200)
        let deviceCode = try #require(authorization.string("device_code"))
        let userCode = try #require(authorization.string("user_code"))
        #expect(authorization.json?["interval"] as? Int == 1)

        // Faster than the interval on purpose: DOT never answers slow_down.
        for _ in 0..<3 {
            let poll = try await server.pollDevice(deviceCode)
            #expect(poll.status == 400)
            #expect(poll.string("error") == "authorization_pending")
        }
        try await server.approveDevice(userCode: userCode, username: user.username)
        let granted = try await server.pollDevice(deviceCode)
        #expect(granted.status == 200)
        let access = try #require(granted.string("access_token"))
        #expect(try await server.me(accessToken: access).string("username") == user.username)
    }

    @Test func authorizationCodeWithPKCEIsExchangedOnce() async throws {
        let server = try Fixture.required()
        // RFC 7636 Appendix B: this verifier's S256 challenge.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        let code = try await server.authorizationCode(
            for: "alice", pkceChallenge: challenge, redirectURI: Fixture.redirectURI, state: "state-1")
        let exchange = [
            "grant_type": "authorization_code", "client_id": Fixture.pkceClientID, "code": code,
            "redirect_uri": Fixture.redirectURI.absoluteString, "code_verifier": verifier,
        ]

        let wrongVerifier = try await server.tokenRequest(exchange.merging(["code_verifier": "x" + verifier]) { $1 })
        #expect(wrongVerifier.string("error") == "invalid_grant")
        let tokens = try await server.tokenRequest(exchange)
        #expect(tokens.status == 200)
        let access = try #require(tokens.string("access_token"))
        #expect(try await server.me(accessToken: access).string("username") == "alice")
        #expect(try await server.tokenRequest(exchange).string("error") == "invalid_grant")
    }

    @Test func privateServerRestartKeepsItsURLAndDatabaseAndAppliesSettings() async throws {
        try await Fixture.withPrivateServer { server in
            let before = server.baseURL
            let first = try await server.passwordGrant(Fixture.alice)
            let second = try await server.refresh(try #require(first.refresh))
            let secondRefresh = try #require(second.string("refresh_token"))

            let after = try await server.restart(settings: ["REFRESH_TOKEN_REUSE_PROTECTION": "true"])
            #expect(after == before)
            #expect(server.baseURL == before)
            let secondAccess = try #require(second.string("access_token"))
            #expect(try await server.me(accessToken: secondAccess).status == 200)

            // Reuse protection: replaying the rotated token revokes the whole family.
            #expect(try await server.refresh(try #require(first.refresh)).string("error") == "invalid_grant")
            #expect(try await server.refresh(secondRefresh).string("error") == "invalid_grant")
            #expect(try await server.me(accessToken: secondAccess).status == 401)
        }
    }
}
