import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct OAuthClientTests {
    // MARK: - Refresh

    @Test func refreshRotatesAndTheOldRefreshTokenIsThenRejected() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let original = try mock.issueTokens(for: "alice")
            let oldRefresh = try #require(original.refreshToken)
            let client = mock.makeClient()

            let renewed = try await client.refresh(using: oldRefresh)

            #expect(renewed.accessToken.hasPrefix("at-alice-") && renewed.accessToken != original.accessToken)
            let newRefresh = try #require(renewed.refreshToken)
            #expect(newRefresh != oldRefresh)
            #expect(mock.isActive(token: renewed.accessToken) && mock.isActive(token: newRefresh))
            #expect(!mock.isActive(token: oldRefresh))

            let error = await #expect(throws: SessionError.self) { try await client.refresh(using: oldRefresh) }
            #expect(error?.code == .refreshRejected)
            #expect(error?.oauthError == "invalid_grant")
            // Reuse of a rotated token ends the grant on the server, the newest tokens included.
            #expect(mock.reuseDetectionCount == 1)
            #expect(!mock.isActive(token: newRefresh) && !mock.isActive(token: renewed.accessToken))
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 2)
        }
    }

    @Test func refreshWithoutRotationKeepsTheRefreshToken() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(rotatesRefreshTokens: false)) { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            let client = mock.makeClient()
            let first = try await client.refresh(using: refresh)
            let second = try await client.refresh(using: refresh)
            #expect(
                first.refreshToken == nil && second.refreshToken == nil, "RFC 6749 §6: the caller keeps the old one")
            #expect(first.accessToken != second.accessToken)
            #expect(mock.isActive(token: refresh))
        }
    }

    @Test func expiryIsMeasuredFromTheArrivalOnTheInjectedClock() async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning(configuration: .init(accessTokenLifetime: .seconds(900))) {
            mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            clock.advance(by: .seconds(42))
            let tokens = try await mock.makeClient(clock: clock).refresh(using: refresh)
            // The manual clock did not move during the exchange, so the arrival instant is exactly `now`.
            #expect(tokens.expiresAt == clock.now.advanced(by: .seconds(900)))
            #expect(tokens.receivedAtWall == clock.wallNow)
            #expect(tokens.receivedAt == clock.now)
            #expect(tokens.lifetime == .seconds(900))
        }
    }

    @Test func invalidGrantIsRefreshRejectedAndNamesNoToken() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            mock.failNext(.token, with: .invalidGrant)
            let error = await #expect(throws: SessionError.self) { try await mock.makeClient().refresh(using: refresh) }
            #expect(error?.code == .refreshRejected)
            #expect(error?.statusCode == 400)
            #expect(!"\(String(describing: error))".contains(refresh))
            #expect(!(error?.message.contains(refresh) ?? true))
        }
    }

    @Test(arguments: [
        (MockAuthorizationServer.Failure.serviceUnavailable(retryAfter: .seconds(7)), 503, Duration?.some(.seconds(7))),
        (.tooManyRequests(retryAfter: .seconds(3)), 429, .seconds(3)),
        (.internalServerError, 500, nil),
        (.serviceUnavailable(retryAfter: nil), 503, nil),
    ])
    func outagesAreProviderOutageWithTheServersRetryAfter(
        failure: MockAuthorizationServer.Failure, status: Int, retryAfter: Duration?
    ) async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            mock.failNext(.token, with: failure)
            let error = await #expect(throws: SessionError.self) { try await mock.makeClient().refresh(using: refresh) }
            #expect(error?.code == .providerOutage)
            #expect(error?.statusCode == status)
            #expect(error?.retryAfter == retryAfter)
            #expect(error?.isTransient == true)
            #expect(mock.isActive(token: refresh), "an outage changes nothing on the server")
        }
    }

    @Test(arguments: MockAuthorizationServer.MalformedBody.allCases)
    func malformedTokenResponsesLeaveTheStoredCredentialsUntouched(body: MockAuthorizationServer.MalformedBody)
        async throws
    {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let client = mock.makeClient()
            let original = try mock.issueTokens(for: "alice")
            let refresh = try #require(original.refreshToken)

            // Straight from the client.
            mock.failNext(.token, with: .malformedBody(body))
            let direct = await #expect(throws: SessionError.self) { try await client.refresh(using: refresh) }
            #expect(direct?.code == .malformedTokenResponse)

            // Through a session whose token the server no longer accepts.
            let store = InMemoryCredentialStore()
            let stored = CredentialRecord(account: alice, refreshToken: refresh, savedAt: Date())
            await store.save(stored)
            let session = UserSession(
                account: alice, tokens: original, store: store, tokenEndpoint: client)
            mock.invalidateAccessTokens(for: "alice")
            mock.failNext(.token, with: .malformedBody(body))
            let error = await #expect(throws: SessionError.self) {
                try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            }
            #expect(error?.code == .malformedTokenResponse)
            #expect(await store.load(for: alice) == stored)
            #expect(session.tokens == original)
            #expect(mock.isActive(token: refresh))
            session.end()
        }
    }

    @Test(arguments: [
        (LocalServer.Fault.closeBeforeResponding, SessionError.Code.networkUnavailable),
        (.truncatedBody, .networkUnavailable),
        (.garbage, .malformedResponse),
    ])
    func brokenExchangesMapToTransportErrors(fault: LocalServer.Fault, code: SessionError.Code) async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            let client = mock.makeClient()
            // The same client has just talked to the server: a kept-alive connection would be reused now.
            _ = try await client.password(username: "alice", password: "password")
            mock.failNext(.token, with: .fault(fault))
            let error = await #expect(throws: SessionError.self) { try await client.refresh(using: refresh) }
            #expect(error?.code == code)
            // The request was sent once: nothing resent it behind the caller's back.
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            // And the client recovers on the next exchange.
            #expect(try await client.refresh(using: refresh).accessToken.hasPrefix("at-alice-"))
        }
    }

    @Test func aServerThatIsNotListeningIsNetworkUnavailable() async throws {
        let mock = try await MockAuthorizationServer.start()
        let client = mock.makeClient()
        await mock.stop()
        let error = await #expect(throws: SessionError.self) { try await client.refresh(using: "rt-alice-x") }
        #expect(error?.code == .networkUnavailable)
    }

    @Test func aServerThatNeverAnswersIsTimedOut() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            mock.failNext(.token, with: .neverAnswer)
            let client = mock.makeClient(requestTimeout: .milliseconds(300))
            let error = await #expect(throws: SessionError.self) { try await client.refresh(using: "rt-alice-x") }
            #expect(error?.code == .timedOut)
        }
    }

    @Test func cancellingTheCallerCancelsTheExchange() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            let gate = Gate()
            mock.holdNext(.token, at: gate)
            let client = mock.makeClient()
            let refreshing = Task { try await client.refresh(using: refresh) }
            await gate.waitForArrivals(1)
            refreshing.cancel()
            await #expect(throws: CancellationError.self) { try await refreshing.value }
            gate.open()
        }
    }

    @Test func aRedirectIsNotFollowed() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            let target = mock.tokenEndpoint.absoluteString
            mock.server.route("/moved-token") { _ in LocalServer.Response(status: 307, headers: [("Location", target)])
            }
            let client = OAuthClient(
                configuration: .init(tokenEndpoint: mock.url("/moved-token"), clientID: "sessionkit-tests"))
            let error = await #expect(throws: SessionError.self) { try await client.refresh(using: refresh) }
            #expect(error?.code == .malformedResponse)
            #expect(error?.statusCode == 307)
            #expect(mock.tokenRequestCount == 0, "the refresh token was not posted to the redirect target")
        }
    }

    @Test func tokenResponsesAreNeverCached() async throws {
        let configuration = MockAuthorizationServer.Configuration(
            rotatesRefreshTokens: false, tokenResponseCacheControl: "public, max-age=3600")
        try await MockAuthorizationServer.withRunning(configuration: configuration) { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            let client = mock.makeClient()
            // Byte-identical requests answered as cacheable: a cache would answer the second one itself.
            let first = try await client.refresh(using: refresh)
            let second = try await client.refresh(using: refresh)
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 2)
            #expect(first.accessToken != second.accessToken)
            let requests = mock.requests.filter { $0.path == "/token" }
            #expect(requests.allSatisfy { $0.header("Cache-Control") == "no-store" })
        }
    }

    @Test func anUnusableConfigurationIsInvalidInputAndSendsNothing() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            let plain = OAuthClient(
                configuration: .init(tokenEndpoint: URL(string: "http://id.example.com/token")!, clientID: "c"))
            let insecure = await #expect(throws: SessionError.self) { try await plain.refresh(using: "rt-x") }
            #expect(insecure?.code == .invalidInput)
            let noEndpoints = OAuthClient(configuration: .init(tokenEndpoint: mock.tokenEndpoint, clientID: "c"))
            let revoke = await #expect(throws: SessionError.self) {
                try await noEndpoints.revoke("x", hint: .accessToken)
            }
            // No revocation endpoint is the server's lack, not an input error (issue 47): sign-out reports it so.
            #expect(revoke?.code == .noRevocationEndpoint)
            let device = await #expect(throws: SessionError.self) { try await noEndpoints.startDeviceAuthorization() }
            #expect(device?.code == .invalidInput)
            #expect(throws: SessionError.self) { try noEndpoints.authorizationRequest(redirectURI: "app:/cb") }
            let empty = await #expect(throws: SessionError.self) { try await mock.makeClient().refresh(using: "") }
            #expect(empty?.code == .invalidInput)
            #expect(mock.tokenRequestCount == 0)
        }
    }

    @Test func anUnknownClientIsAuthorizationFailed() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            let error = await #expect(throws: SessionError.self) {
                try await mock.makeClient(clientID: "someone-else").refresh(using: refresh)
            }
            #expect(error?.code == .authorizationFailed)
            #expect(error?.oauthError == "invalid_client")
            #expect(mock.isActive(token: refresh))
        }
    }

    // MARK: - Authorization code with PKCE, password

    /// Runs the browser's part: opens the authorization URL and follows the redirect to the mock's callback.
    private func browse(_ url: URL) async throws -> URL {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (_, response) = try await session.data(for: URLRequest(url: url))
        return try #require(response.url)
    }

    @Test func codeExchangeWithPKCE() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let client = mock.makeClient()
            let request = try client.authorizationRequest(
                redirectURI: mock.callbackURL.absoluteString, scope: "profile")
            try mock.approveNextAuthorization(as: "alice")

            let callback = try await browse(request.url)
            let code = try AuthorizationResponse.parse(
                callbackURL: callback, expectedState: request.state, expectedIssuer: mock.issuer)
            let tokens = try await client.exchange(code: code, pkce: request.pkce, redirectURI: request.redirectURI)

            #expect(tokens.accessToken.hasPrefix("at-alice-"))
            #expect(tokens.scope == "profile")
            #expect(tokens.refreshToken != nil)
            #expect(mock.tokenRequestCount(grant: .authorizationCode) == 1)
        }
    }

    @Test func aWrongVerifierIsRefusedAsAuthorizationFailed() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let client = mock.makeClient()
            let request = try client.authorizationRequest(redirectURI: mock.callbackURL.absoluteString)
            try mock.approveNextAuthorization(as: "alice")
            let code = try AuthorizationResponse.parse(
                callbackURL: try await browse(request.url), expectedState: request.state)

            let error = await #expect(throws: SessionError.self) {
                try await client.exchange(code: code, pkce: PKCE(), redirectURI: request.redirectURI)
            }
            // invalid_grant refuses the code here, not a refresh token: nothing to sign out of.
            #expect(error?.code == .authorizationFailed)
            #expect(error?.oauthError == "invalid_grant")
            #expect(!(error?.message.contains(code) ?? true))
            #expect(mock.accessTokens(issuedTo: "alice").isEmpty)
        }
    }

    @Test func aDeniedAuthorizationIsAccessDenied() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            let client = mock.makeClient()
            let request = try client.authorizationRequest(redirectURI: mock.callbackURL.absoluteString)
            mock.denyNextAuthorization()
            let callback = try await browse(request.url)
            let error = #expect(throws: SessionError.self) {
                try AuthorizationResponse.parse(callbackURL: callback, expectedState: request.state)
            }
            #expect(error?.code == .accessDenied)
        }
    }

    @Test func passwordGrantForTests() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice", password: "s3cret")
            let client = mock.makeClient()
            let tokens = try await client.password(username: "alice", password: "s3cret", scope: "profile")
            #expect(tokens.accessToken.hasPrefix("at-alice-"))
            let error = await #expect(throws: SessionError.self) {
                try await client.password(username: "alice", password: "wrong")
            }
            #expect(error?.code == .authorizationFailed)
            #expect(!(error?.message.contains("wrong") ?? true))
        }
    }

    // MARK: - Device authorization

    /// Waits until the poller sleeps, advances the clock by `step`, and waits until the mock has seen `polls`
    /// device-code requests and the poller has handled the answer (it sleeps again).
    private func poll(_ clock: ManualClock, by step: Duration, until polls: Int, _ mock: MockAuthorizationServer)
        async
    {
        await eventually { clock.sleepers == 1 }
        clock.advance(by: step)
        await eventually { mock.tokenRequestCount(grant: .deviceCode) == polls }
        await eventually { clock.sleepers == 1 }
    }

    private func deviceConfiguration(_ clock: ManualClock, lifetime: Duration = .seconds(600))
        -> MockAuthorizationServer.Configuration
    {
        .init(deviceCodeLifetime: lifetime, devicePollingInterval: .seconds(5), clock: clock)
    }

    @Test func deviceFlowPendingTwiceThenApproved() async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning(configuration: deviceConfiguration(clock)) { mock in
            try mock.addUser("alice")
            let client = mock.makeClient(clock: clock)
            let authorization = try await client.startDeviceAuthorization(scope: "profile")
            #expect(authorization.interval == .seconds(5))
            #expect(authorization.verificationURI == mock.url("/device/verify"))
            let polling = Task { try await client.pollDeviceAuthorization(authorization) }

            await poll(clock, by: .seconds(5), until: 1, mock)
            await poll(clock, by: .seconds(5), until: 2, mock)
            try mock.approveDevice(userCode: authorization.userCode, as: "alice")
            clock.advance(by: .seconds(5))
            let tokens = try await polling.value

            #expect(tokens.accessToken.hasPrefix("at-alice-"))
            #expect(tokens.scope == "profile")
            #expect(mock.tokenRequestCount(grant: .deviceCode) == 3)
        }
    }

    @Test func deviceFlowStopsWhenTheCodeWouldExpireBeforeTheNextPoll() async throws {
        let clock = ManualClock()
        // The server's own clock is the system's: on it the code stays pending, so only the client can stop.
        let configuration = MockAuthorizationServer.Configuration(
            deviceCodeLifetime: .seconds(20), devicePollingInterval: .seconds(5))
        try await MockAuthorizationServer.withRunning(configuration: configuration) { mock in
            let client = mock.makeClient(clock: clock)
            let authorization = try await client.startDeviceAuthorization()
            let receivedAt = clock.now
            clock.advance(by: .seconds(8))  // the app showed the code for a while before polling
            let polling = Task { try await client.pollDeviceAuthorization(authorization, receivedAt: receivedAt) }
            await poll(clock, by: .seconds(5), until: 1, mock)  // at 13 s
            await eventually { clock.sleepers == 1 }
            clock.advance(by: .seconds(5))  // at 18 s: pending, and the next poll would be at 23 s
            let error = await #expect(throws: SessionError.self) { try await polling.value }
            #expect(error?.code == .authorizationExpired)
            #expect(error?.oauthError == nil, "the client stopped on its own")
            #expect(mock.tokenRequestCount(grant: .deviceCode) == 2, "no poll after the code expired")
        }
    }

    /// The user denies the request, or the server lets the code expire: polling stops with the typed error.
    @Test(arguments: [
        (true, SessionError.Code.accessDenied, "access_denied"),
        (false, SessionError.Code.authorizationExpired, "expired_token"),
    ])
    func deviceFlowEndsWhenTheServerSaysSo(denied: Bool, code: SessionError.Code, oauthError: String) async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning(configuration: deviceConfiguration(clock)) { mock in
            let client = mock.makeClient(clock: clock)
            let authorization = try await client.startDeviceAuthorization()
            let polling = Task { try await client.pollDeviceAuthorization(authorization) }
            await poll(clock, by: .seconds(5), until: 1, mock)
            if denied {
                try mock.denyDevice(userCode: authorization.userCode)
            } else {
                try mock.expireDevice(userCode: authorization.userCode)
            }
            clock.advance(by: .seconds(5))
            let error = await #expect(throws: SessionError.self) { try await polling.value }
            #expect(error?.code == code)
            #expect(error?.oauthError == oauthError)
            #expect(mock.tokenRequestCount(grant: .deviceCode) == 2)
        }
    }

    @Test func deviceFlowSlowsDownWhenAsked() async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning(configuration: deviceConfiguration(clock)) { mock in
            try mock.addUser("alice")
            let client = mock.makeClient(clock: clock)
            let authorization = try await client.startDeviceAuthorization()
            let polling = Task { try await client.pollDeviceAuthorization(authorization) }
            mock.failNext(.token, with: .oauthError("slow_down", status: 400))
            await poll(clock, by: .seconds(5), until: 1, mock)

            clock.advance(by: .seconds(5))
            #expect(clock.sleepers == 1, "after slow_down the interval is 10 s: still waiting at 5 s")
            #expect(mock.tokenRequestCount(grant: .deviceCode) == 1)
            try mock.approveDevice(userCode: authorization.userCode, as: "alice")
            clock.advance(by: .seconds(5))
            #expect(try await polling.value.accessToken.hasPrefix("at-alice-"))
            #expect(mock.tokenRequestCount(grant: .deviceCode) == 2)
        }
    }

    @Test func deviceFlowRidesOutAnOutageWithBackoff() async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning(configuration: deviceConfiguration(clock)) { mock in
            try mock.addUser("alice")
            let client = mock.makeClient(clock: clock)
            let authorization = try await client.startDeviceAuthorization()
            let polling = Task { try await client.pollDeviceAuthorization(authorization) }
            mock.failNext(.token, with: .fault(.closeBeforeResponding))
            await poll(clock, by: .seconds(5), until: 1, mock)
            try mock.approveDevice(userCode: authorization.userCode, as: "alice")
            clock.advance(by: .seconds(5))
            #expect(clock.sleepers == 1, "a lost connection doubles the wait")
            clock.advance(by: .seconds(5))
            #expect(try await polling.value.accessToken.hasPrefix("at-alice-"))
        }
    }

    @Test func cancellingDevicePollingStopsIt() async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning(configuration: deviceConfiguration(clock)) { mock in
            let client = mock.makeClient(clock: clock)
            let authorization = try await client.startDeviceAuthorization()
            let polling = Task { try await client.pollDeviceAuthorization(authorization) }
            await eventually { clock.sleepers == 1 }
            polling.cancel()
            await #expect(throws: CancellationError.self) { try await polling.value }
            clock.advance(by: .seconds(60))
            #expect(mock.tokenRequestCount(grant: .deviceCode) == 0)
        }
    }

    // MARK: - Revocation

    @Test func revokingAnUnknownTokenSucceeds() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try await mock.makeClient().revoke("rt-nobody-0123", hint: .refreshToken)
            #expect(mock.revocationRequestCount == 1)
            let body = try #require(mock.requests.first { $0.path == "/revoke" }).bodyText
            #expect(body == "token=rt-nobody-0123&token_type_hint=refresh_token&client_id=sessionkit-tests")
        }
    }

    @Test func revokingARefreshTokenEndsItsGrant() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let tokens = try mock.issueTokens(for: "alice")
            try await mock.makeClient().revoke(try #require(tokens.refreshToken), hint: .refreshToken)
            #expect(!mock.isActive(token: try #require(tokens.refreshToken)))
            #expect(!mock.isActive(token: tokens.accessToken))
        }
    }

    @Test(arguments: [
        MockAuthorizationServer.Failure.serviceUnavailable(retryAfter: .seconds(2)),
        .tooManyRequests(retryAfter: .seconds(2)),
    ])
    func revocationRetriesAfterTheServersRetryAfter(failure: MockAuthorizationServer.Failure) async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            mock.failNext(.revocation, with: failure)
            let client = mock.makeClient(clock: clock)
            let revocation = Task { try await client.revoke(refresh, hint: .refreshToken) }

            await eventually { clock.sleepers == 1 }
            #expect(mock.revocationRequestCount == 1)
            clock.advance(by: .seconds(2) - .milliseconds(1))
            #expect(clock.sleepers == 1, "Retry-After: 2 is honoured")
            #expect(mock.revocationRequestCount == 1)
            // The retry is spread over the 2 s after Retry-After.
            clock.advance(by: .seconds(2) + .milliseconds(1))
            try await revocation.value

            #expect(mock.revocationRequestCount == 2)
            #expect(!mock.isActive(token: refresh))
        }
    }

    @Test func revocationGivesUpWhenTheRetryBoundIsExceeded() async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning { mock in
            let policy = RetryPolicy(
                maximumAttempts: 3, baseDelay: .seconds(1), maximumDelay: .seconds(5), retryableStatuses: [429, 503])
            let client = mock.makeClient(clock: clock, revocationRetry: policy)
            mock.failNext(.revocation, with: .serviceUnavailable(retryAfter: .seconds(1)), times: 3)
            let revocation = Task { try await client.revoke("rt-alice-x", hint: .refreshToken) }
            for attempts in 1...2 {
                await eventually { clock.sleepers == 1 }
                #expect(mock.revocationRequestCount == attempts)
                clock.advance(by: .seconds(5))
            }
            let error = await #expect(throws: SessionError.self) { try await revocation.value }
            #expect(error?.code == .providerOutage)
            #expect(error?.retryAfter == .seconds(1))
            #expect(mock.revocationRequestCount == 3)

            // A Retry-After beyond the policy's longest wait is not waited for at all.
            mock.failNext(.revocation, with: .serviceUnavailable(retryAfter: .seconds(60)))
            let beyond = await #expect(throws: SessionError.self) {
                try await mock.makeClient(clock: clock, revocationRetry: policy).revoke("x", hint: .accessToken)
            }
            #expect(beyond?.code == .providerOutage)
            #expect(beyond?.retryAfter == .seconds(60))
            #expect(mock.revocationRequestCount == 4)
        }
    }

    @Test func unsupportedTokenTypeIsATypedError() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(revokesAccessTokens: false)) { mock in
            try mock.addUser("alice")
            let tokens = try mock.issueTokens(for: "alice")
            let error = await #expect(throws: SessionError.self) {
                try await mock.makeClient().revoke(tokens.accessToken, hint: .accessToken)
            }
            #expect(error?.code == .authorizationFailed)
            #expect(error?.oauthError == "unsupported_token_type")
            #expect(error?.statusCode == 400)
            #expect(!"\(String(describing: error))".contains(tokens.accessToken))
            #expect(mock.revocationRequestCount == 1, "not retried")
        }
    }

    // MARK: - Through a UserSession

    @Test(arguments: [2, 8, 64])
    func concurrentRequestsWithAnInvalidatedTokenMakeOneTokenRequest(k: Int) async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let store = InMemoryCredentialStore()
            let session = UserSession(
                account: alice, tokens: try mock.issueTokens(for: "alice"), store: store,
                tokenEndpoint: mock.makeClient())
            let oldToken = try #require(session.tokens?.accessToken)
            mock.invalidateAccessTokens(for: "alice")
            let gate = Gate()
            mock.holdNext(.token, at: gate)

            let results = Task {
                try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<k {
                        group.addTask { text(try await session.data(for: URLRequest(url: mock.userInfoEndpoint)).0) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            // Every request has reached the resource with the invalidated token before the refresh may finish.
            await gate.waitForArrivals(1)
            await eventually { mock.requests.filter { $0.path == "/api/me" }.count >= k }
            gate.open()
            let bodies = try await results.value

            #expect(mock.tokenRequestCount == 1)
            #expect(bodies.count == k && bodies.allSatisfy { $0 == #"{"user":"alice"}"# })
            let newToken = try #require(session.tokens?.accessToken)
            #expect(newToken != oldToken && mock.isActive(token: newToken))
            let resourceRequests = mock.requests.filter { $0.path == "/api/me" }
            #expect(resourceRequests.filter { $0.bearerToken == oldToken }.count == k)
            #expect(resourceRequests.filter { $0.bearerToken == newToken }.count == k)
            #expect(await store.load(for: alice)?.refreshToken == session.tokens?.refreshToken)
            session.end()
        }
    }

    @Test func aRefreshLostAfterTheServerRotatedEndsInRefreshRejectedWithoutALoop() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let store = InMemoryCredentialStore()
            let original = try mock.issueTokens(for: "alice")
            let oldRefresh = try #require(original.refreshToken)
            await store.save(CredentialRecord(account: alice, refreshToken: oldRefresh, savedAt: Date()))
            let session = UserSession(
                account: alice, tokens: original, store: store,
                tokenEndpoint: mock.makeClient(),
                refreshPolicy: RefreshPolicy(retryPolicy: RetryPolicy(maximumAttempts: 1)))
            mock.invalidateAccessTokens(for: "alice")
            mock.failNext(.token, with: .processThenDrop)

            // The server rotates; the answer never arrives (the process was killed, the network dropped).
            let lost = await #expect(throws: SessionError.self) {
                try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            }
            #expect(lost?.code == .networkUnavailable)
            #expect(!mock.isActive(token: oldRefresh), "the server retired the refresh token the client still holds")
            #expect(await store.load(for: alice)?.refreshToken == oldRefresh)

            // The next refresh presents the retired token: reuse detection ends the grant, the client stops.
            let rejected = await #expect(throws: SessionError.self) {
                try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            }
            #expect(rejected?.code == .refreshRejected)
            #expect(mock.reuseDetectionCount == 1)
            #expect(mock.tokenRequestCount == 2, "invalid_grant is terminal: not retried")
            // The tokens the lost answer carried died with the grant.
            let issued = mock.accessTokens(issuedTo: "alice")
            #expect(issued.count == 2 && issued.allSatisfy { !mock.isActive(token: $0) })
            session.end()
        }
    }

    @Test func aManagedSessionWhoseRefreshWasLostSignsOutOnce() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let store = InMemoryCredentialStore()
            let client = mock.makeClient()
            let manager = SessionManager(
                configuration: .init(store: store, tokenEndpoint: client, revoker: client))
            let session = try await manager.signIn(alice, tokens: try mock.issueTokens(for: "alice"))
            mock.invalidateAccessTokens(for: "alice")
            mock.failNext(.token, with: .processThenDrop)

            // The default policy retries the lost refresh at once, presenting the retired token.
            let error = await #expect(throws: SessionError.self) {
                try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            }
            #expect(error?.code == .refreshRejected)
            #expect(!session.isActive)
            #expect(manager.current == nil)
            #expect(mock.reuseDetectionCount == 1)
            let afterwards = await #expect(throws: SessionError.self) {
                try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            }
            #expect(afterwards?.code == .sessionEnded)
            #expect(mock.tokenRequestCount == 2)
            // Behind the purge the rejection queued.
            #expect(try await manager.vault.load(for: alice) == nil)
        }
    }

    /// A token endpoint that tells the test when the real client's call has returned or thrown.
    private final class ObservedEndpoint: TokenEndpoint {
        let client: OAuthClient
        let returned = Gate()

        init(_ client: OAuthClient) { self.client = client }

        func refresh(using refreshToken: String) async throws -> TokenSet {
            defer { returned.open() }
            return try await client.refresh(using: refreshToken)
        }
    }

    @Test func endingTheSessionDuringASlowRefreshLeavesNoTokenBehind() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let store = InMemoryCredentialStore()
            let vault = CredentialVault(store: store)
            let original = try mock.issueTokens(for: "alice")
            try await vault.save(CredentialRecord(account: alice, refreshToken: original.refreshToken, savedAt: Date()))
            let endpoint = ObservedEndpoint(mock.makeClient())
            let session = UserSession(account: alice, tokens: original, vault: vault, tokenEndpoint: endpoint)
            mock.invalidateAccessTokens(for: "alice")
            // The server issues the new tokens, then its answer is slow to leave.
            let gate = Gate()
            mock.holdNext(.token, at: gate, afterProcessing: true)

            let request = Task { try await session.data(for: URLRequest(url: mock.userInfoEndpoint)) }
            await gate.waitForArrivals(1)
            let fresh = try #require(mock.accessTokens(issuedTo: "alice").last)
            #expect(fresh != original.accessToken)

            session.end()
            try await vault.delete(for: alice)
            gate.open()
            let error = await #expect(throws: SessionError.self) { try await request.value }
            #expect(error?.code == .sessionEnded)
            await endpoint.returned.wait()

            #expect(session.tokens == nil)
            #expect(try await vault.load(for: alice) == nil)
            #expect(!mock.requests.contains { $0.bearerToken == fresh })
            #expect(mock.tokenRequestCount == 1)
        }
    }

    @Test func signingOutDuringASlowRefreshRevokesTheGrantAndStoresNothing() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let store = InMemoryCredentialStore()
            let client = mock.makeClient()
            let endpoint = ObservedEndpoint(client)
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: endpoint, revoker: client))
            let session = try await manager.signIn(alice, tokens: try mock.issueTokens(for: "alice"))
            mock.invalidateAccessTokens(for: "alice")
            let gate = Gate()
            mock.holdNext(.token, at: gate, afterProcessing: true)

            let request = Task { try await session.data(for: URLRequest(url: mock.userInfoEndpoint)) }
            await gate.waitForArrivals(1)
            let fresh = try #require(mock.accessTokens(issuedTo: "alice").last)

            let report = try #require(await manager.signOut())
            gate.open()
            let error = await #expect(throws: SessionError.self) { try await request.value }
            #expect(error?.code == .sessionEnded)
            await endpoint.returned.wait()

            #expect(report.refreshTokenRevocation == .succeeded)
            #expect(mock.revocationRequestCount == 1)
            // Revoking the refresh token the session held ended the grant, so the token the late refresh
            // obtained is dead on the server as well.
            #expect(!mock.isActive(token: fresh))
            #expect(!mock.requests.contains { $0.bearerToken == fresh })
            #expect(await store.load(for: alice) == nil)
            #expect(await store.accounts().isEmpty)
        }
    }

    @Test func signOutCompletesWhenTheRevocationEndpointNeverAnswers() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let store = InMemoryCredentialStore()
            let client = mock.makeClient()
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: client, revoker: client))
            try await manager.signIn(alice, tokens: try mock.issueTokens(for: "alice"))
            mock.failNext(.revocation, with: .neverAnswer)
            let report = try #require(await manager.signOut(options: SignOutOptions(serverTimeout: .milliseconds(200))))
            #expect(report.refreshTokenRevocation == .unanswered)
            #expect(report.credentialDeletion == .succeeded)
            #expect(await store.load(for: alice) == nil)
        }
    }
}
