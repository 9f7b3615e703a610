import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// A user who did nothing wrong stays signed in: the refresh in flight belongs to the refresher, not to the caller
/// that started it, and short-lived tokens are refreshed neither on every request nor into the loop guard.
@Suite(.timeLimit(.minutes(1))) struct RefreshLivenessTests {
    /// A rotating endpoint that fails with `invalid_grant` when a refresh token is presented twice, as a server
    /// with reuse detection (RFC 9700 §4.14.2) does.
    private func rotatingEndpoint(gate: Gate? = nil) -> ScriptedTokenEndpoint {
        let seen = Lock<Set<String>>([])
        return ScriptedTokenEndpoint(gate: gate) { refreshToken, n in
            guard seen.withLock({ $0.insert(refreshToken).inserted }) else {
                throw SessionError(.refreshRejected, "reused", statusCode: 400, oauthError: "invalid_grant")
            }
            return TokenSet(accessToken: "t\(n)", refreshToken: "r\(n)", lifetime: .seconds(3600))
        }
    }

    @Test func cancellingTheCallerThatStartedARefreshLeavesTheFlightToTheOthers() async throws {
        // Given a refresh held at the token endpoint, started by a caller that then goes away (a view's task)
        let gate = Gate()
        let endpoint = rotatingEndpoint(gate: gate)
        let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
        let starter = Task { try await session.refreshTokens() }
        await gate.waitForArrivals(1)
        starter.cancel()
        await #expect(throws: CancellationError.self) { try await starter.value }

        // When another caller needs a refresh while the first one is still in flight
        let next = Task { try await session.refreshTokens() }
        let joined = await eventually(within: .seconds(30)) { session.refresher?.callersWaitingForFlight == 1 }
        #expect(joined, "the second caller never waited for the flight")
        gate.open()
        try await next.value

        // Then it joined the flight: the refresh token was presented once, and the session holds its result
        #expect(endpoint.presented == ["refresh-alice"])
        #expect(session.isActive)
        #expect(session.tokens?.accessToken == "t1")
        session.end()
    }

    /// The owner ends the session as soon as it hears the grant was rejected (as the manager does), before the
    /// flight resolves: the caller still learns why, `refreshRejected`, not a generic `sessionEnded`.
    @Test func aCallerLearnsTheGrantWasRejectedWhenTheOwnerEndsTheSessionOnHearingIt() async throws {
        let endpoint = ScriptedTokenEndpoint { _, _ in
            throw SessionError(.refreshRejected, "invalid_grant", statusCode: 400, oauthError: "invalid_grant")
        }
        let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
        session.setEventHandler { event in
            if case .refreshRejected = event { session.end() }
        }
        let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(error?.code == .refreshRejected)
        #expect(!session.isActive)
    }

    /// A refresh needed just as the one in flight finishes must see the flight's tokens, never present the refresh
    /// token the flight just used (a server with reuse detection answers that by revoking the grant). The refresher
    /// reads the session's tokens inside the state machine's critical section and a flight commits before it
    /// finishes, so the decision is made from (flight in progress, its tokens committed or not) read together; the
    /// machine is shown here to answer both orders without a second presentation.
    @Test func aRefreshNeededAsTheFlightFinishesDoesNotPresentItsRefreshTokenAgain() throws {
        typealias Machine = RefreshStateMachine<Int>
        let now = ContinuousClock.now
        let old = Machine.Held(tokens: tokens("alice"), expiring: false)
        let new = Machine.Held(
            tokens: TokenSet(accessToken: "t1", refreshToken: "r1", lifetime: .seconds(3600)), expiring: false)
        var machine = Machine(maximumRefreshes: 5, window: .seconds(30))
        guard case .start(let id, let presented) = machine.need(.forced, holding: old, at: now) else {
            Issue.record("no flight started")
            return
        }
        #expect(presented == "refresh-alice")
        let launched = machine.launched(id, handle: 1)
        #expect(launched)

        // The flight is in progress and has not committed: a 401 for the old token joins it.
        guard case .join(id, 1) = machine.need(.rejected(accessToken: "token-alice"), holding: old, at: now) else {
            Issue.record("a 401 during the flight did not join it")
            return
        }
        // The flight committed its tokens, then finished: a 401 for the old token takes the new one.
        let settled = machine.flightSettled(id, outcome: .success("t1"))
        #expect(settled)
        let finished = machine.flightFinished(id)
        #expect(finished)
        let after = machine.need(.rejected(accessToken: "token-alice"), holding: new, at: now)
        guard case .use("t1") = after else {
            Issue.record("a 401 after the flight finished did not take its token: \(after)")
            return
        }
        #expect(machine.flightInProgress == nil)
    }

    /// The same at the session: a 401 for the token a finished refresh replaced is answered with the new token, and
    /// the endpoint sees the refresh token once.
    @Test func aRejectionOfTheTokenAFinishedRefreshReplacedPresentsNothing() async throws {
        let endpoint = rotatingEndpoint()
        let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
        let refresher = try #require(session.refresher)
        try await session.refreshTokens()
        try await refresher.recover(session, rejectedToken: "token-alice")
        #expect(endpoint.presented == ["refresh-alice"])
        #expect(session.isActive)
        #expect(session.tokens?.accessToken == "t1")
        session.end()
    }

    /// A proactive refresh of a token that lives long enough never counts against the loop guard, also when
    /// 401-driven refreshes have filled its window: the user keeps a token although the server rejected a few.
    @Test func aProactiveRefreshOfAnHourTokenStartsAfter401sFilledTheLoopGuard() async throws {
        let clock = ManualClock()
        // Hour-long tokens, each received with ten seconds left, so that every one is within its margin at once.
        let endpoint = ScriptedTokenEndpoint { _, n in
            TokenSet(
                accessToken: "t\(n)", refreshToken: "r\(n)", lifetime: .seconds(3600),
                receivedAt: clock.now.advanced(by: .seconds(-3590)))
        }
        let session = UserSession(
            account: alice, tokens: tokens("alice", clock: clock),
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: endpoint)
        let refresher = try #require(session.refresher)
        for _ in 0..<5 { try await refresher.recover(session, rejectedToken: session.tokens?.accessToken ?? "") }
        let refused = await #expect(throws: SessionError.self) {
            try await refresher.recover(session, rejectedToken: session.tokens?.accessToken ?? "")
        }
        #expect(refused?.code == .excessiveRefresh)

        try await refresher.refreshIfExpiring(session)
        #expect(endpoint.count == 6, "the proactive refresh was refused")
        #expect(session.tokens?.accessToken == "t6")
        session.end()
    }

    @Test func aCallerWhoseWaitTimedOutLeavesTheFlightInPlace() async throws {
        let clock = ManualClock()
        let gate = Gate()
        let endpoint = rotatingEndpoint(gate: gate)
        let session = UserSession(
            account: alice,
            tokens: tokens("alice"),
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: endpoint,
            refreshPolicy: RefreshPolicy(waitTimeout: .seconds(5))
        )
        let starter = Task { try await session.refreshTokens() }
        await gate.waitForArrivals(1)
        await eventually { clock.sleepers == 1 }
        clock.advance(by: .seconds(5))
        let timedOut = await #expect(throws: SessionError.self) { try await starter.value }
        #expect(timedOut?.code == .refreshTimedOut)

        let next = Task { try await session.refreshTokens() }
        await eventually { clock.sleepers == 1 }
        gate.open()
        try await next.value
        #expect(endpoint.presented == ["refresh-alice"])
        #expect(session.tokens?.accessToken == "t1")
        session.end()
    }

    @Test func aSixtySecondTokenIsNotRefreshedWhileFreshAndNeverTripsTheLoopGuard() async throws {
        let clock = ManualClock()
        try await LocalServer.withRunning { server in
            server.route("/me", tokenEchoHandler)
            let endpoint = ScriptedTokenEndpoint { _, n in
                TokenSet(accessToken: "t\(n)", refreshToken: "r\(n)", lifetime: .seconds(60), receivedAt: clock.now)
            }
            // The defaults: leeway 60 s, jitter 15 s, at most 5 refreshes in 30 s.
            let session = UserSession(
                account: alice,
                tokens: tokens("alice", lifetime: .seconds(60), clock: clock),
                configuration: UserSession.Configuration(clock: clock),
                tokenEndpoint: endpoint
            )
            for _ in 0..<10 { _ = try await session.data(for: get(server, "/me")) }
            #expect(endpoint.count == 0, "a token in the first half of its life is fresh")
            clock.advance(by: .seconds(29))
            for _ in 0..<10 { _ = try await session.data(for: get(server, "/me")) }
            #expect(endpoint.count == 0)
            // Ten lifetimes, a request every 10 s: one refresh per token, none refused.
            for _ in 0..<60 {
                clock.advance(by: .seconds(10))
                _ = try await session.data(for: get(server, "/me"))
            }
            #expect(endpoint.count >= 10 && endpoint.count <= 20)
            session.end()
        }
    }

    @Test(arguments: [
        // (lifetime s, leeway s, jitter s, offset s) → margin in ms
        (3600, 60, 15, 15, 75_000), (60, 60, 15, 0, 24_000), (60, 60, 15, 15, 30_000), (10, 60, 0, 0, 5_000),
        (150, 60, 15, 7, 67_000), (0, 60, 15, 0, 60_000),
    ])
    func theMarginIsAtMostHalfTheLifetimeAndKeepsTheJittersShare(
        lifetime: Int, leeway: Int, jitter: Int, offset: Int, expected: Int
    ) {
        let margin = RefreshStateMachine<Never>.margin(
            lifetime: lifetime == 0 ? nil : .seconds(lifetime),
            leeway: .seconds(leeway),
            jitter: .seconds(jitter),
            offset: .seconds(offset)
        )
        #expect(abs((margin - .milliseconds(expected)) / .milliseconds(1)) < 1)
    }

    // MARK: - A session ended while its token request is out

    /// Alice's session on a manager over `store`, ended (`end()`, the record kept) while its refresh's token request
    /// is held at the gate, the server having rotated: the state every test below starts from.
    struct EndedWithRequestOut {
        let gate = Gate()
        let endpoint: ScriptedTokenEndpoint
        let recorder = DiagnosticsTests.Recorder()
        let store: any CredentialStore
        let manager: SessionManager
        let session: UserSession
        /// What the caller that started the refresh was answered.
        let callerError: SessionError?

        init(store: any CredentialStore, endpoint: (Gate) -> ScriptedTokenEndpoint) async throws {
            self.store = store
            self.endpoint = endpoint(gate)
            manager = SessionManager(
                configuration: .init(
                    store: store, tokenEndpoint: self.endpoint,
                    sessionConfiguration: .init(diagnostics: recorder.diagnostics)))
            let session = try await manager.signIn(alice, tokens: tokens("alice"))
            self.session = session
            let caller = Task { try await session.refreshTokens() }
            await gate.waitForArrivals(1)
            session.end()
            if case .failure(let error) = await caller.result {
                callerError = error as? SessionError
            } else {
                callerError = nil
            }
        }

        /// Whether the released request told `outcome`.
        func told(_ outcome: String) -> Bool {
            recorder.recorded.contains { $0.kind == .refreshStoredAfterEnd && $0.fields["outcome"] == outcome }
        }
    }

    /// A server that closes a user's session (`end()`, the record kept: an idle session dropped from memory, a
    /// process's visit done) while the refresh's token request is out: the server has rotated, so cancelling would
    /// leave the record holding the retired refresh token, and the account's next session would present it and
    /// be signed out by reuse detection (the fleet lost two accounts this way when token requests were slow). The
    /// request runs on, its rotation goes to the record, and the next session presents the new token.
    @Test(arguments: [false, true])
    func aSessionEndedWhileItsTokenRequestIsOutLeavesTheRotationInTheRecord(coordinated: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            let store: any CredentialStore =
                coordinated ? try FileCredentialStore(directory: directory) : InMemoryCredentialStore()
            let ended = try await EndedWithRequestOut(store: store, endpoint: rotatingEndpoint)
            #expect(ended.callerError?.code == .sessionEnded, "the caller is answered at once, not at the answer")
            ended.gate.open()
            #expect(await ended.manager.finishPendingWork(within: .seconds(20)).isEmpty)

            #expect(try await store.load(for: alice)?.refreshToken == "r1", "the rotation is in the record")
            #expect(ended.session.tokens == nil, "and nothing of it reached the ended session")
            #expect(ended.told("stored"))
            let next = try #require(try await ended.manager.session(for: alice))
            try await next.refreshTokens()
            #expect(ended.endpoint.presented == ["refresh-alice", "r1"], "no refresh token presented twice")
            #expect(next.isActive)
            #expect(try await store.load(for: alice)?.refreshToken == "r2")
            next.end()
        }
    }

    /// The account's next session, loaded while a released request is out, waits for the request's write: with a
    /// store no lock guards, it would otherwise hold the retired refresh token and present it.
    @Test func theAccountsNextSessionWaitsForTheReleasedRequestsRotation() async throws {
        let ended = try await EndedWithRequestOut(store: InMemoryCredentialStore(), endpoint: rotatingEndpoint)
        let manager = ended.manager
        let load = Task { try await manager.session(for: alice) }
        let loadQueued = await eventually(within: .seconds(20)) { manager.vault.pending.operations >= 2 }
        #expect(loadQueued, "the load was never queued behind the released request")
        ended.gate.open()
        let next = try #require(try await load.value)
        #expect(next.tokens?.refreshToken == "r1", "the next session holds the rotation, not the retired token")
        try await next.refreshTokens()
        #expect(ended.endpoint.presented == ["refresh-alice", "r1"])
        next.end()
        _ = await manager.finishPendingWork(within: .seconds(20))
        #expect(try await ended.store.load(for: alice)?.refreshToken == "r2")
    }

    /// The deletion of an account's record asked for while a released request is out waits for the request's
    /// write and runs after it: the account ends signed out, not brought back by the late rotation.
    @Test func anAccountEndedWhileAReleasedRequestIsOutStaysEnded() async throws {
        let ended = try await EndedWithRequestOut(store: InMemoryCredentialStore(), endpoint: rotatingEndpoint)
        let manager = ended.manager
        let ending = Task { await manager.endAccount(alice, because: AccountEnding("test_ended")) }
        let queued = await eventually(within: .seconds(20)) { manager.vault.pending.operations >= 2 }
        #expect(queued, "the ending's deletion was never queued")
        ended.gate.open()
        let report = await ending.value
        #expect(report?.credentialDeletion == .succeeded)
        _ = await manager.finishPendingWork(within: .seconds(20))
        #expect(try await ended.store.load(for: alice) == nil, "ended, and no late write brought the record back")
        #expect(ended.endpoint.presented == ["refresh-alice"])
    }

    /// A record deleted behind the store's back while a released request is out (another process whose lock wait
    /// timed out, an app clearing its store) stays deleted: the rotation is written only over the record that still
    /// holds the refresh token the request presented.
    @Test func aRecordDeletedWhileAReleasedRequestIsOutIsNotBroughtBack() async throws {
        try await TemporaryDirectory.with { directory in
            let ended = try await EndedWithRequestOut(
                store: try FileCredentialStore(directory: directory), endpoint: rotatingEndpoint)
            // Another process's view of the same directory, deleting without the lock.
            try await FileCredentialStore(directory: directory, coordinatingProcesses: false).delete(for: alice)
            ended.gate.open()
            _ = await ended.manager.finishPendingWork(within: .seconds(20))
            #expect(try await ended.store.load(for: alice) == nil)
            #expect(ended.told("record_changed"))
        }
    }

    /// A store that refuses the released request's write (a locked keyring) loses nothing else: the record keeps
    /// what it held, the refusal is told, and nothing of the rotation reaches the ended session.
    @Test func aReleasedRequestsWriteThatTheStoreRefusesIsToldAndChangesNothing() async throws {
        let store = SaveRefusingStore()
        let ended = try await EndedWithRequestOut(store: store, endpoint: rotatingEndpoint)
        store.refusesSaves.withLock { $0 = true }
        ended.gate.open()
        _ = await ended.manager.finishPendingWork(within: .seconds(20))
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice")
        #expect(ended.told("failed (storageFailure)"))
        #expect(ended.session.tokens == nil)
    }

    /// A new sign-in of the account replaces its record: the replaced session's refresh in flight is cancelled,
    /// and the record holds the new sign-in's grant, not a rotation of the old one.
    @Test func aNewSignInCancelsTheReplacedSessionsRefreshAndKeepsItsOwnRecord() async throws {
        let gate = Gate()
        let endpoint = rotatingEndpoint(gate: gate)
        let store: any CredentialStore = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: endpoint))
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        let caller = Task { try await session.refreshTokens() }
        await gate.waitForArrivals(1)
        _ = try await manager.signIn(alice, tokens: tokens("alice", refresh: "refresh-alice-again"))
        _ = await caller.result
        gate.open()
        _ = await manager.finishPendingWork(within: .seconds(20))
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice-again")
        manager.current?.end()
    }
}
