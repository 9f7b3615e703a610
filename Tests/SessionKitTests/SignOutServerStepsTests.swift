import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// A revoker that answers each kind of token its own way: held at a gate, failed, or revoked.
final class PerKindRevoker: TokenRevoker {
    let revoked = Lock<[TokenTypeHint: [String]]>([:])
    let arrived = Lock<[String]>([])
    let gates: [TokenTypeHint: Gate]
    let failures: [TokenTypeHint: SessionError]

    init(gates: [TokenTypeHint: Gate] = [:], failures: [TokenTypeHint: SessionError] = [:]) {
        self.gates = gates
        self.failures = failures
    }

    func revoke(_ token: String, hint: TokenTypeHint) async throws {
        arrived.withLock { $0.append(token) }
        if let gate = gates[hint] { await gate.wait() }
        if let failure = failures[hint] { throw failure }
        revoked.withLock { $0[hint, default: []].append(token) }
    }

    func tokens(_ hint: TokenTypeHint) -> [String] { revoked.withLock { $0[hint] ?? [] } }
}

/// Sign-out's server steps: what is revoked, in what order, within what bound, and what the report says.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct SignOutServerStepsTests {
    /// The local deadline lies past the server's, so advancing the clock past a server step's bound never also cuts
    /// the record's deletion short.
    private let both = SignOutOptions(
        serverSteps: [.revokeRefreshToken, .revokeAccessToken], serverTimeout: .seconds(5), localTimeout: .seconds(60))

    @Test func aRestoredSessionThatNeverFetchedAnAccessTokenRevokesNoEmptyToken() async throws {
        // Given a record with a refresh token only, restored while the provider is unreachable.
        let store = InMemoryCredentialStore()
        await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        let revoker = PerKindRevoker()
        let offline = ScriptedTokenEndpoint { _, _ in throw SessionError(.networkUnavailable, "offline") }
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: offline, revoker: revoker, launchBudget: .seconds(60)))
        #expect(await manager.restore() == .active(alice, offline: true))
        #expect(manager.current?.tokens?.accessToken == "", "no access token was ever fetched")

        // When it signs out asking for both revocations.
        let report = try #require(await manager.signOut(options: both))

        // Then only the refresh token is revoked; no revocation of "" reaches the server.
        #expect(revoker.arrived.withLock { $0 } == ["refresh-alice"])
        #expect(report.refreshTokenRevocation == .succeeded)
        #expect(report.accessTokenRevocation == .notRequested)
    }

    @Test func anEmptyAccessTokenIsNotReportedAsRevokedInTheBackground() async throws {
        let store = InMemoryCredentialStore()
        await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        let offline = ScriptedTokenEndpoint { _, _ in throw SessionError(.networkUnavailable, "offline") }
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: offline, revoker: PerKindRevoker(), launchBudget: .seconds(60)))
        #expect(await manager.restore() == .active(alice, offline: true))
        var options = both
        options.waitForServer = false
        let report = try #require(await manager.signOut(options: options))
        #expect(report.refreshTokenRevocation == .inBackground)
        #expect(report.accessTokenRevocation == .notRequested)
        _ = await manager.finishPendingWork(within: .seconds(30))
    }

    @Test func theReportAndItsDescriptionShowBothRevocationsWhenOneFails() async throws {
        let revoker = PerKindRevoker(failures: [.accessToken: SessionError(.providerOutage, "503")])
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore(), revoker: revoker))
        try await manager.signIn(alice, tokens: tokens("alice"))

        let report = try #require(await manager.signOut(options: both))

        #expect(report.refreshTokenRevocation == .succeeded)
        #expect(report.accessTokenRevocation == .failed(.providerOutage))
        #expect(report.description.contains("refresh-token revocation succeeded"))
        #expect(report.description.contains("access-token revocation failed (providerOutage)"))
        #expect(!report.description.contains("token-alice") && !report.description.contains("refresh-alice"))
    }

    @Test(arguments: [TokenTypeHint.refreshToken, .accessToken])
    func aHungRevocationDoesNotStarveTheOther(hung: TokenTypeHint) async throws {
        // Given a revocation endpoint that never answers for one kind of token.
        let clock = ManualClock()
        let revoker = PerKindRevoker(gates: [hung: Gate()])
        let (manager, recorder) = Self.recordedManager(revoker, clock: clock)
        try await manager.signIn(alice, tokens: tokens("alice", clock: clock))
        let other: TokenTypeHint = hung == .refreshToken ? .accessToken : .refreshToken

        // When the session signs out, the other revocation completes (its outcome decided and told) with the clock
        // standing still: the two run at the same time, not one after the other under one deadline.
        let signOut = Task { await manager.signOut(options: both) }
        let otherDone = await told(
            recorder, other == .refreshToken ? "refresh_token_revocation" : "access_token_revocation")
        #expect(otherDone, "the \(other) revocation waited behind the hung \(hung) one")
        #expect(revoker.tokens(other).count == 1)
        // The hung one was sent before the bound passes, so the report says it went unanswered, not unsent.
        let hungToken = hung == .refreshToken ? "refresh-alice" : "token-alice"
        try #require(await eventually(within: .seconds(30)) { revoker.arrived.withLock { $0 }.contains(hungToken) })
        try #require(await eventually(within: .seconds(30)) { clock.sleepers > 0 })
        clock.advance(by: .seconds(5))

        // Then the report says which one went unanswered and which one succeeded.
        let report = try #require(await signOut.value)
        let outcomes = [report.refreshTokenRevocation, report.accessTokenRevocation]
        #expect(outcomes == (hung == .refreshToken ? [.unanswered, .succeeded] : [.succeeded, .unanswered]))
    }

    @Test func theAccessTokenIsRevokedOnlyAfterTheAppsBackendSignOutUsedIt() async throws {
        let clock = ManualClock()
        let backendGate = Gate()
        let revoker = PerKindRevoker()
        let seenByBackend = Lock<[String]>([])
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(), revoker: revoker,
                sessionConfiguration: UserSession.Configuration(clock: clock)))
        try await manager.signIn(alice, tokens: tokens("alice", clock: clock))
        var options = both
        options.serverSteps.append(
            .backend { tokens in
                seenByBackend.withLock { $0.append(tokens.accessToken) }
                await backendGate.wait()
            })

        let signOut = Task { await manager.signOut(options: options) }
        await backendGate.waitForArrivals(1)
        let refreshDone = await eventually(within: .seconds(60)) { !revoker.tokens(.refreshToken).isEmpty }
        #expect(refreshDone, "the refresh token's revocation runs beside the backend step")
        #expect(revoker.tokens(.accessToken).isEmpty, "the access token outlives the backend step that uses it")
        backendGate.open()

        let report = try #require(await signOut.value)
        #expect(seenByBackend.withLock { $0 } == ["token-alice"])
        #expect(report.serverSession == .succeeded)
        #expect(report.accessTokenRevocation == .succeeded)
        #expect(revoker.tokens(.accessToken) == ["token-alice"])
    }

    /// A manager on `clock` whose diagnostics go to a recorder: a server step's event is emitted once its outcome
    /// is decided, so a test that waits for it orders its next clock move after that decision, not a guess.
    private static func recordedManager(
        _ revoker: PerKindRevoker, clock: ManualClock
    ) -> (SessionManager, DiagnosticsTests.Recorder) {
        let recorder = DiagnosticsTests.Recorder()
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(), revoker: revoker,
                sessionConfiguration: UserSession.Configuration(clock: clock, diagnostics: recorder.diagnostics)))
        return (manager, recorder)
    }

    private func told(_ recorder: DiagnosticsTests.Recorder, _ step: String) async -> Bool {
        await eventually(within: .seconds(60)) {
            recorder.recorded.contains { $0.kind == .signOutStep && $0.fields["step"] == step }
        }
    }

    /// Alice signs out on a manual clock while the app's backend step hangs: returns once the backend step has
    /// arrived, the refresh token's revocation is done, and the backend's deadline (5 s) and the access revocation's
    /// wait (2.5 s) are on the clock.
    private func signingOutWithAHungBackend(
        _ revoker: PerKindRevoker
    ) async throws -> (
        manager: SessionManager, recorder: DiagnosticsTests.Recorder, clock: ManualClock,
        signOut: Task<SignOutReport?, Never>, hung: Gate
    ) {
        let clock = ManualClock()
        let (manager, recorder) = Self.recordedManager(revoker, clock: clock)
        try await manager.signIn(alice, tokens: tokens("alice", clock: clock))
        var options = both
        let hung = Gate()
        options.serverSteps.append(.backend { _ in await hung.wait() })
        let start = clock.now
        let signOut = Task { await manager.signOut(options: options) }
        await hung.waitForArrivals(1)
        // The two sleeps themselves, not a count of sleepers: another sleep on its way out would make the count.
        let waits: Set = [start.advanced(by: .milliseconds(2500)), start.advanced(by: .seconds(5))]
        // Bounded, so that a sign-out that never puts these waits on the clock fails here by name.
        try #require(
            await eventually(within: .seconds(30)) {
                !revoker.tokens(.refreshToken).isEmpty && waits.isSubset(of: clock.sleepingUntil)
            })
        return (manager, recorder, clock, signOut, hung)
    }

    @Test func aHungBackendStepHoldsTheAccessTokensRevocationForHalfTheBoundAtMost() async throws {
        let revoker = PerKindRevoker()
        let (_, recorder, clock, signOut, _) = try await signingOutWithAHungBackend(revoker)
        #expect(revoker.tokens(.accessToken).isEmpty)
        clock.advance(by: .milliseconds(2499))
        #expect(revoker.arrived.withLock { $0 } == ["refresh-alice"], "sent before half the bound")
        clock.advance(by: .milliseconds(1))
        // Half the bound passed, so the access token is revoked without the backend; its outcome is decided (and
        // told) before the bound passes, so the report says what the server answered.
        #expect(await told(recorder, "access_token_revocation"))
        #expect(revoker.tokens(.accessToken) == ["token-alice"])
        clock.advance(by: .milliseconds(2500))

        let report = try #require(await signOut.value)
        #expect(report.serverSession == .unanswered)
        #expect(report.accessTokenRevocation == .succeeded)
        #expect(report.refreshTokenRevocation == .succeeded)
    }

    /// What the report says of a revocation the bound cut short is what is known: sent and not answered (the server
    /// may have acted on it), never a bare "timed out" that reads as if nothing reached it.
    @Test func aRevocationSentButNotAnsweredWithinTheBoundIsReportedAsSuch() async throws {
        let revoker = PerKindRevoker(gates: [.accessToken: Gate()])
        let (_, recorder, clock, signOut, _) = try await signingOutWithAHungBackend(revoker)
        clock.advance(by: .milliseconds(2500))
        let sent = await eventually(within: .seconds(60)) { revoker.arrived.withLock { $0 }.contains("token-alice") }
        #expect(sent, "the access token's revocation reached the revoker at half the bound")
        clock.advance(by: .milliseconds(2500))

        let report = try #require(await signOut.value)
        #expect(report.accessTokenRevocation == .unanswered)
        #expect(report.serverSession == .unanswered)
        #expect(report.refreshTokenRevocation == .succeeded)
        #expect(report.description.contains("access-token revocation sent, not answered within the bound"))
        let event = recorder.recorded.first { $0.fields["step"] == "access_token_revocation" }
        #expect(event?.fields["outcome"] == "sent, not answered within the bound")
        #expect(event?.level == .warning)
    }

    /// A server step the bound cut short is cancelled and left behind: its work hears the cancellation rather than
    /// running on after the report was given.
    @Test func aServerStepTheBoundCutShortIsCancelled() async throws {
        let clock = ManualClock()
        let revoker = PerKindRevoker()
        let (manager, _) = Self.recordedManager(revoker, clock: clock)
        try await manager.signIn(alice, tokens: tokens("alice", clock: clock))
        let arrived = Gate()
        let cancelled = Lock(false)
        var options = SignOutOptions(serverTimeout: .seconds(5))
        options.serverSteps.append(
            .backend { _ in
                await arrived.wait()
                // Waits for ever unless cancelled: a step left running past its bound would never end.
                do { try await Task.sleep(for: .seconds(86_400)) } catch { cancelled.withLock { $0 = true } }
            })

        let signOut = Task { await manager.signOut(options: options) }
        await arrived.waitForArrivals(1)
        arrived.open()
        try #require(await eventually(within: .seconds(30)) { clock.sleepers >= 1 })
        clock.advance(by: .seconds(5))
        let report = try #require(await signOut.value)
        #expect(report.serverSession == .unanswered)
        let heard = await eventually(within: .seconds(30)) { cancelled.withLock { $0 } }
        #expect(heard, "the backend step went on running after its bound")
    }

    /// A revocation the bound passed before it could be sent is never sent afterwards, and says so.
    @Test func aRevocationTheBoundPassedBeforeItCouldBeSentIsNeverSent() async throws {
        let revoker = PerKindRevoker()
        let (manager, _, clock, signOut, hung) = try await signingOutWithAHungBackend(revoker)
        // Half the bound and the whole bound pass in one step: the access revocation wakes after its deadline.
        clock.advance(by: .seconds(5))

        let report = try #require(await signOut.value)
        #expect(report.accessTokenRevocation == .notSent)
        #expect(report.description.contains("access-token revocation not sent: the bound passed first"))
        hung.open()
        _ = await manager.finishPendingWork(within: .seconds(30))
        #expect(!revoker.arrived.withLock { $0 }.contains("token-alice"), "a step not sent by its bound stays unsent")
    }
}
