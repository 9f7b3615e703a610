import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The items of the seed's list of situations to test that no other suite showed whole (issue 50): a cancelled
/// user-presence prompt at restore, at a refresh and during a sign-out, and a device clock hours off in either
/// direction. The article "The seed's test list" maps every item of the list to the tests that show it.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct SeedTestListTests {
    func rotatingEndpoint(gate: Gate? = nil) -> ScriptedTokenEndpoint {
        ScriptedTokenEndpoint(gate: gate) { refreshToken, n in
            let user = refreshToken.replacingOccurrences(of: "refresh-", with: "").prefix { $0 != "-" }
            return TokenSet(
                accessToken: "token-\(user)-\(n)", refreshToken: "refresh-\(user)-\(n)", lifetime: .seconds(3600))
        }
    }

    // MARK: - Biometric cancellation

    /// At launch the stored access token is gone, so restore refreshes, and the prompt guarding the refresh token is
    /// dismissed: the account is restored (signed in, with no usable access token yet), its record stays, the refresh
    /// token never left, and the cancellation is told as such, at restore and to the next caller.
    @Test func aPromptCancelledAtRestoreKeepsTheAccountSignedInAndItsRecord() async throws {
        let store: any CredentialStore = InMemoryCredentialStore()
        try await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        let asked = Counter()
        let endpoint = rotatingEndpoint()
        let recorder = DiagnosticsTests.Recorder()
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: endpoint, userPresence: cancellingPrompt(asked: asked),
                sessionConfiguration: .init(diagnostics: recorder.diagnostics), launchBudget: .seconds(120)))

        let state = await manager.restore()

        guard case .active(let account, _) = state else {
            Issue.record("a cancelled prompt at restore left the state \(state), not signed in")
            return
        }
        #expect(account == alice)
        #expect(asked.value == 1)
        #expect(endpoint.count == 0, "the refresh token was presented without the user's consent")
        let session = try #require(manager.current)
        #expect(session.account == alice)
        #expect(session.isActive)
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice", "nothing deleted")
        #expect(recorder.saw([(.refreshFailed, ["code": "userCancelled"])]))

        // The next use asks again; its caller gets the typed error, and still nobody is signed out.
        let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(error?.code == .userCancelled)
        #expect(asked.value == 2)
        #expect(manager.current === session)
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice")
    }

    /// A request answered 401 needs a refresh, and the user dismisses the prompt: the request fails with
    /// `userCancelled`, the prompt is not asked again in a loop, both accounts stay signed in with their records,
    /// and the refresh token kept is the live one: once the user confirms, it is presented, once.
    @Test func aPromptCancelledAtARefreshFailsTheRequestTypedAndSignsNobodyOut() async throws {
        try await LocalServer.withRunning { server in
            server.route("/me") { request in
                request.bearerToken == "token-alice"
                    ? LocalServer.Response(status: 401) : .json(#"{"t":"\#(request.bearerToken ?? "")"}"#)
            }
            let store: any CredentialStore = InMemoryCredentialStore()
            let asked = Counter()
            let confirms = Lock(false)
            let presence: @Sendable (String) async throws -> Void = { _ in
                asked.increment()
                guard confirms.withLock({ $0 }) else { throw SessionError(.userCancelled, "the user cancelled") }
            }
            let endpoint = rotatingEndpoint()
            let manager = SessionManager(
                configuration: .init(
                    store: store, tokenEndpoint: endpoint, userPresence: presence, launchBudget: .seconds(120)))
            let other = try await manager.signIn(bob, tokens: tokens("bob"))
            let session = try await manager.signIn(alice, tokens: tokens("alice"))

            let error = await #expect(throws: SessionError.self) { try await session.data(for: get(server, "/me")) }

            #expect(error?.code == .userCancelled)
            #expect(asked.value == 1, "the prompt was asked again in a loop")
            #expect(endpoint.count == 0)
            #expect(manager.state == .active(alice, offline: false))
            #expect(manager.current === session)
            #expect(session.isActive && other.isActive)
            #expect(Set(manager.sessions.map(\.account)) == [alice, bob])
            #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice", "nothing deleted")
            #expect(try await store.load(for: bob)?.refreshToken == "refresh-bob")

            confirms.withLock { $0 = true }
            let (body, _) = try await session.data(for: get(server, "/me"))
            #expect(text(body) == #"{"t":"token-alice-1"}"#)
            #expect(endpoint.presented == ["refresh-alice"])
            #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice-1")
        }
    }

    /// Alice's prompt is on screen while Bob signs out, and the user dismisses it before Bob's sign-out has finished:
    /// Bob's sign-out completes as asked; Alice's refresh fails with `userCancelled`, and she is the current account,
    /// signed in, with her record.
    @Test func aPromptCancelledDuringAnotherAccountsSignOutSignsNobodyElseOut() async throws {
        let store: any CredentialStore = InMemoryCredentialStore()
        let prompt = Gate()
        let asked = Counter()
        let presence: @Sendable (String) async throws -> Void = { _ in
            asked.increment()
            await prompt.wait()
            throw SessionError(.userCancelled, "the user cancelled")
        }
        let revocation = Gate()
        let revoker = ScriptedRevoker(gate: revocation)
        let endpoint = rotatingEndpoint()
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: endpoint, revoker: revoker, userPresence: presence))
        let aliceSession = try await manager.signIn(alice, tokens: tokens("alice"))
        let bobSession = try await manager.signIn(bob, tokens: tokens("bob"))
        let refresh = Task { try await aliceSession.refreshTokens() }
        await prompt.waitForArrivals(1)  // Alice's prompt is on screen

        let signOut = Task { await manager.signOut(bobSession) }
        await revocation.waitForArrivals(1)  // Bob's local phases are done; his revocation is under way
        #expect(manager.current === aliceSession)
        prompt.open()  // the user dismisses Alice's prompt
        let error = await #expect(throws: SessionError.self) { try await refresh.value }
        revocation.open()
        let report = try #require(await signOut.value)

        #expect(error?.code == .userCancelled)
        #expect(report.account == bob)
        #expect(report.credentialDeletion == .succeeded)
        #expect(revoker.revoked.withLock { $0 }.contains("refresh-bob"))
        #expect(!bobSession.isActive)
        #expect(manager.current === aliceSession)
        #expect(aliceSession.isActive)
        #expect(manager.state == .active(alice, offline: false))
        #expect(manager.sessions.map(\.account) == [alice])
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice", "nothing of Alice deleted")
        #expect(try await store.accounts() == [alice])
        #expect(endpoint.count == 0)
        #expect(asked.value == 1)
    }

    // MARK: - Clock skew

    /// The device's wall clock is hours off the provider's (both directions, and then moved by as much again
    /// mid-session): the access token is sent while it is fresh and refreshed once when it has expired on the
    /// monotonic clock, the refresh's ID token is judged on the provider's clock (its `Date`) and accepted, nobody is
    /// signed out, and a relaunch on the same device restores the account with the stored access token. Every
    /// offset gives the outcome the correct clock gives.
    @Test(arguments: [-5, 0, 5])
    func aDeviceClockHoursOffChangesNoOutcome(hours: Int) async throws {
        try await OpenIDProviderTests.withProvider { mock in
            let offset = TimeInterval(hours * 3600)
            mock.server.route("GET", "/me") { request in .json(#"{"t":"\#(request.bearerToken ?? "")"}"#) }
            let clock = ManualClock(wallClock: Date().addingTimeInterval(offset))
            let account = Account(issuer: mock.issuer, subject: "alice")
            let store: any CredentialStore = InMemoryCredentialStore()
            let configuration = SessionManager.Configuration(
                store: store, providers: [Provider(id: "mock", openID: mock.provider(clock: clock))],
                sessionConfiguration: .init(storesAccessToken: true, clock: clock),
                refreshPolicy: RefreshPolicy(jitter: .zero), launchBudget: .seconds(120))
            @Sendable func sent(by session: UserSession) async throws -> String {
                text(try await session.data(for: get(mock.server, "/me")).0)
            }
            let tokenRequests = { mock.server.requests.filter { $0.path == "/token" }.count }

            let manager = SessionManager(configuration: configuration)
            let session = try await manager.signIn(
                account,
                tokens: TokenSet(
                    accessToken: "at-first", refreshToken: "rt-first", lifetime: .seconds(3600),
                    receivedAt: clock.now, receivedAtWall: clock.wallNow),
                through: "mock")
            #expect(try await sent(by: session) == #"{"t":"at-first"}"#)
            clock.shiftWallClock(by: offset)
            #expect(try await sent(by: session) == #"{"t":"at-first"}"#)
            #expect(tokenRequests() == 0, "a fresh token was refreshed")

            // An hour passes on the monotonic clock; the wall clock stays as far off the provider's as it was.
            clock.advance(by: .seconds(3600))
            clock.shiftWallClock(by: -3600)
            let body = try await sent(by: session)
            let refreshed = try #require(mock.lastAccessToken.withLock { $0 })
            #expect(body == #"{"t":"\#(refreshed)"}"#, "the expired token was sent")
            #expect(tokenRequests() == 1)
            #expect(manager.state == .active(account, offline: false))
            #expect(manager.current === session)
            let rotated = try #require(try await store.load(for: account)?.refreshToken)
            #expect(rotated != "rt-first")

            // A relaunch on the same device.
            let relaunched = SessionManager(configuration: configuration)
            #expect(await relaunched.restore() == .active(account, offline: false))
            let restored = try #require(relaunched.current)
            #expect(try await sent(by: restored) == #"{"t":"\#(refreshed)"}"#)
            #expect(tokenRequests() == 1, "the stored access token was judged on another clock than the one it was")
            #expect(try await store.load(for: account)?.refreshToken == rotated)
        }
    }
}
