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
    private let both = SignOutOptions(revokeRefreshToken: true, revokeAccessToken: true, serverTimeout: .seconds(5))

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
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(), revoker: revoker,
                sessionConfiguration: UserSession.Configuration(clock: clock)))
        try await manager.signIn(alice, tokens: tokens("alice", clock: clock))
        let other: TokenTypeHint = hung == .refreshToken ? .accessToken : .refreshToken

        // When the session signs out, the other revocation completes with the clock standing still: the two run at
        // the same time, not one after the other under one deadline.
        let signOut = Task { await manager.signOut(options: both) }
        let otherDone = await eventually(within: .seconds(60)) { !revoker.tokens(other).isEmpty }
        #expect(otherDone, "the \(other) revocation waited behind the hung \(hung) one")
        await eventually { clock.sleepers > 0 }
        clock.advance(by: .seconds(5))

        // Then the report says which one timed out and which one succeeded.
        let report = try #require(await signOut.value)
        let outcomes = [report.refreshTokenRevocation, report.accessTokenRevocation]
        #expect(outcomes == (hung == .refreshToken ? [.timedOut, .succeeded] : [.succeeded, .timedOut]))
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
        options.terminateServerSession = { tokens in
            seenByBackend.withLock { $0.append(tokens.accessToken) }
            await backendGate.wait()
        }

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

    @Test func aHungBackendStepHoldsTheAccessTokensRevocationForHalfTheBoundAtMost() async throws {
        let clock = ManualClock()
        let revoker = PerKindRevoker()
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(), revoker: revoker,
                sessionConfiguration: UserSession.Configuration(clock: clock)))
        try await manager.signIn(alice, tokens: tokens("alice", clock: clock))
        var options = both
        let hung = Gate()
        options.terminateServerSession = { _ in await hung.wait() }

        let signOut = Task { await manager.signOut(options: options) }
        await hung.waitForArrivals(1)
        // The backend step's deadline (5 s) and the access revocation's wait (2.5 s) are on the clock.
        await eventually { !revoker.tokens(.refreshToken).isEmpty && clock.sleepers >= 2 }
        #expect(revoker.tokens(.accessToken).isEmpty)
        clock.advance(by: .milliseconds(2500))
        let revoked = await eventually(within: .seconds(60)) { !revoker.tokens(.accessToken).isEmpty }
        #expect(revoked, "half the bound passed, so the access token is revoked without the backend")
        clock.advance(by: .milliseconds(2500))

        let report = try #require(await signOut.value)
        #expect(report.serverSession == .timedOut)
        #expect(report.accessTokenRevocation == .succeeded)
        #expect(report.refreshTokenRevocation == .succeeded)
    }
}
