import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// Which account is current after the current one signs out while others are live: the one most recently current,
/// and the next launch's restore gives the same answer.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct CurrentAccountRuleTests {
    struct Setup {
        let store = InMemoryCredentialStore()
        let clock = ManualClock()

        func manager() -> SessionManager {
            SessionManager(configuration: .init(store: store, sessionConfiguration: .init(clock: clock)))
        }

        /// Restores a fresh manager on the same store: the next launch.
        func nextLaunch() async -> SessionManager {
            let next = manager()
            await next.restore()
            return next
        }

        /// Moves both clocks on, so each selection has a moment of its own.
        func tick() { clock.advance(by: .seconds(1)) }
    }

    /// Both orders: whichever of Bob and Carol was current last follows, whatever their storage keys say.
    @Test(arguments: [true, false])
    func theAccountCurrentMostRecentlyBecomesCurrentAndRestoreAgrees(carolLast: Bool) async throws {
        let (earlier, later) = carolLast ? (bob, carol) : (carol, bob)
        let setup = Setup()
        let manager = setup.manager()
        let aliceSession = try await manager.signIn(alice, tokens: tokens("alice"))
        setup.tick()
        try await manager.signIn(earlier, tokens: tokens(earlier.subject))
        setup.tick()
        try await manager.signIn(later, tokens: tokens(later.subject))
        setup.tick()
        try await manager.switchTo(aliceSession)
        setup.tick()
        // Alice is current; `later` was current before her, then `earlier`.
        await manager.signOut()
        #expect(manager.current?.account == later)
        #expect(manager.state == .active(later, offline: false))
        #expect(Set(manager.sessions.map(\.account)) == [bob, carol])
        #expect(await manager.finishPendingWork(within: .seconds(5)).isEmpty)

        let next = await setup.nextLaunch()
        #expect(next.current?.account == later)
        #expect(next.state.account == later)
    }

    @Test func anAccountNeverCurrentIsChosenWhenItIsTheOnlyOneLeft() async throws {
        let setup = Setup()
        let manager = setup.manager()
        try await manager.signIn(alice, tokens: tokens("alice"))
        setup.tick()
        try await manager.signIn(bob, tokens: tokens("bob"), makeCurrent: false)
        await manager.signOut()
        #expect(manager.current?.account == bob)
        #expect(manager.state == .active(bob, offline: false))
        let next = await setup.nextLaunch()
        #expect(next.current?.account == bob)
    }

    @Test func theSuccessorsSelectionIsStoredSoTheNextLaunchAgreesEvenAfterMoreSignIns() async throws {
        let setup = Setup()
        let manager = setup.manager()
        try await manager.signIn(alice, tokens: tokens("alice"))
        setup.tick()
        try await manager.signIn(bob, tokens: tokens("bob"), makeCurrent: false)
        setup.tick()
        try await manager.signIn(carol, tokens: tokens("carol"))
        setup.tick()
        // Carol leaves: Alice (current before her) follows, and her record now says so.
        await manager.signOut()
        #expect(manager.current?.account == alice)
        #expect(await manager.finishPendingWork(within: .seconds(5)).isEmpty)
        #expect(await setup.store.load(for: alice)?.selectedAt == setup.clock.wallNow)
        let next = await setup.nextLaunch()
        #expect(next.current?.account == alice)
    }

    @Test func signingOutTheLastAccountLeavesNobodyCurrent() async throws {
        let setup = Setup()
        let manager = setup.manager()
        try await manager.signIn(alice, tokens: tokens("alice"))
        await manager.signOut()
        #expect(manager.current == nil)
        #expect(manager.state == .signedOut)
        let next = await setup.nextLaunch()
        #expect(next.current == nil)
        #expect(next.state == .signedOut)
    }

    @Test func signingOutAnotherAccountLeavesTheCurrentOneCurrent() async throws {
        let setup = Setup()
        let manager = setup.manager()
        let aliceSession = try await manager.signIn(alice, tokens: tokens("alice"))
        setup.tick()
        let bobSession = try await manager.signIn(bob, tokens: tokens("bob"))
        _ = aliceSession
        await manager.signOut(aliceSession)
        #expect(manager.current === bobSession)
        #expect(manager.state == .active(bob, offline: false))
    }

    @Test func aRejectedRefreshTokenLeavesNobodyCurrentAndAsksForThatAccountWhileOthersStayLive() async throws {
        let store = InMemoryCredentialStore()
        let endpoint = ScriptedTokenEndpoint { _, _ in throw SessionError(.refreshRejected, "invalid_grant") }
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: endpoint))
        let bobSession = try await manager.signIn(bob, tokens: tokens("bob"))
        let aliceSession = try await manager.signIn(alice, tokens: tokens("alice"))
        await #expect(throws: SessionError.self) { try await aliceSession.refreshTokens() }
        #expect(manager.state == .reauthenticationRequired(alice))
        #expect(manager.current == nil)
        #expect(manager.sessions.map(\.account) == [bob])
        #expect(bobSession.isActive)
        #expect(await manager.finishPendingWork(within: .seconds(5)).isEmpty)
        #expect(await store.load(for: alice) == nil)
        #expect(await store.load(for: bob) != nil)
    }
}
