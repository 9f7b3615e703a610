import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A long-running app keeps nothing per session or per account once it is done with them (issue 14, item 14), and
/// a deletion of a dead session's record never takes a record it cannot prove is the dead one's (item 12).
@Suite(.timeLimit(.minutes(2))) struct LongRunningTests {
    // MARK: - End handlers

    @Test func switchingBackAndForthKeepsOneEndHandlerPerContainer() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let profile = SessionScoped<String>(empty: "")
        let settings = SessionScoped<Int>(empty: 0)
        manager.register(profile)
        manager.register(settings)
        let first = try await manager.signIn(alice, tokens: tokens("alice"))
        let second = try await manager.signIn(bob, tokens: tokens("bob"))

        for _ in 0..<500 {
            try await manager.switchTo(first)
            try await manager.switchTo(second)
        }

        // Each container has one handler, on the session it is bound to; none is left on the other.
        #expect(second.endHandlerCount == 2)
        #expect(first.endHandlerCount == 0)
        // And the handlers still do their job: ending the bound session empties both containers.
        #expect(profile.commit("Bob", from: second))
        #expect(settings.commit(7, from: second))
        await manager.signOut(second)
        #expect(profile.value == "")
        #expect(settings.value == 0)
        await manager.signOut(first)
    }

    @Test func aContainerRebindingDirectlyLeavesNoHandlerOnTheSessionItLeft() {
        let first = UserSession(account: alice, tokens: tokens("alice"))
        let second = UserSession(account: bob, tokens: tokens("bob"))
        defer {
            first.end()
            second.end()
        }
        let container = SessionScoped<String>(empty: "")
        for _ in 0..<100 {
            container.bind(to: first)
            container.bind(to: second)
            container.bind(to: nil)
        }
        #expect(first.endHandlerCount == 0)
        #expect(second.endHandlerCount == 0)
        container.bind(to: first)
        container.bind(to: first)
        #expect(first.endHandlerCount == 1)
    }

    // MARK: - Dropped sessions and clients

    /// Waits (at most 10 s) until `released` is true: a URLSession may be released on a queue of its own.
    private static func eventually(_ released: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while !released() && ContinuousClock.now < deadline { await Task.yield() }
        return released()
    }

    /// A session dropped without `end()` is released, and its URLSession with it (and so its connections and, on
    /// Linux, the two descriptors of its libcurl multi handle).
    ///
    /// `UserSession.deinit` invalidates the URLSession, which Apple's URLSession needs: one never invalidated lives
    /// until the process exits. On Linux with Swift 6.3.1 a released URLSession goes even without that, so there
    /// the test catches anything that keeps a dropped session or its URLSession alive. Descriptors are counted by
    /// the churn benchmark (`churn.descriptors.delta`), in a process that does nothing else: here, other suites open
    /// and close theirs at the same time.
    @Test func aSessionDroppedWithoutEndIsReleasedWithItsURLSession() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/me") { _ in .json("{}") }
            let refresher = ScriptedTokenEndpoint { _, _ in tokens("alice") }
            weak var session: UserSession?
            weak var urlSession: URLSession?
            do {
                let dropped = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: refresher)
                // Sent a request, as every real session has: its task and handlers must not keep it alive.
                _ = try await dropped.data(for: URLRequest(url: server.url("/me")))
                session = dropped
                urlSession = dropped.urlSession
            }
            #expect(await Self.eventually { session == nil }, "something still holds a dropped session")
            #expect(await Self.eventually { urlSession == nil }, "something still holds a dropped session's URLSession")
        }
    }

    /// A released OAuth client is released with its URLSession (as above: the invalidation in the transport's
    /// `deinit` is what Apple platforms need; on Linux the test catches whatever keeps them alive).
    @Test func aReleasedOAuthClientIsReleasedWithItsURLSession() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            weak var client: OAuthClient?
            weak var urlSession: URLSession?
            do {
                let released = mock.makeClient()
                try await released.revoke("refresh-unknown", hint: .refreshToken)
                client = released
                urlSession = released.transport.session
            }
            #expect(await Self.eventually { client == nil }, "something still holds a released client")
            #expect(await Self.eventually { urlSession == nil }, "something still holds a released client's URLSession")
        }
    }

    // MARK: - The vault's queues

    @Test func anAccountsQueueIsDroppedOnceIdle() async throws {
        let store = InMemoryCredentialStore()
        let vault = CredentialVault(store: store)
        for index in 0..<100 {
            let account = Account(issuer: issuer, subject: "user-\(index)")
            vault.enqueueSave(CredentialRecord(account: account, refreshToken: "refresh-\(index)"))
            // Enqueued behind the save, without waiting: the order holds whether or not the queue is dropped.
            vault.enqueueDelete(for: account)
            #expect(try await vault.load(for: account) == nil)
        }
        let account = Account(issuer: issuer, subject: "kept")
        try await vault.save(CredentialRecord(account: account, refreshToken: "refresh-kept"))

        #expect(vault.pending.accounts == 0)
        #expect(try await vault.load(for: account)?.refreshToken == "refresh-kept")
        #expect(vault.pending.accounts == 0)
    }

    // MARK: - Deleting a dead session's record

    /// A store whose reads fail while it is locked (a keyring waiting for its unlock prompt).
    private final class LockableStore: CredentialStore {
        let inner = InMemoryCredentialStore()
        private let locked = Lock(false)

        func lock() { locked.withLock { $0 = true } }

        func save(_ record: CredentialRecord) async throws { await inner.save(record) }
        func load(for account: Account) async throws -> CredentialRecord? {
            if locked.withLock({ $0 }) { throw SessionError(.storeUnavailable, "the keyring is locked") }
            return await inner.load(for: account)
        }
        func delete(for account: Account) async throws { await inner.delete(for: account) }
        func deleteAll() async throws { await inner.deleteAll() }
        func accounts() async throws -> [Account] { await inner.accounts() }
    }

    @Test func aRecordThatCannotBeReadIsNotDeletedForADeadToken() async throws {
        let store = LockableStore()
        let vault = CredentialVault(store: store)
        // A newer session of the account has saved its record since the dead one's token was rejected.
        try await vault.save(CredentialRecord(account: alice, refreshToken: "refresh-newer"))
        store.lock()

        let error = await vault.enqueueDelete(for: alice, ifHolding: "refresh-dead").value

        #expect(SessionError.Code.of(error ?? CancellationError()) == .storeUnavailable, "the load error is returned")
        #expect(await store.inner.load(for: alice)?.refreshToken == "refresh-newer", "the newer record was taken")
    }

    @Test func aRecordIsDeletedOnlyWhenItHoldsTheDeadToken() async throws {
        let store = InMemoryCredentialStore()
        let vault = CredentialVault(store: store)
        try await vault.save(CredentialRecord(account: alice, refreshToken: "refresh-newer"))
        #expect(await vault.enqueueDelete(for: alice, ifHolding: "refresh-dead").value == nil)
        #expect(await store.load(for: alice) != nil)

        try await vault.save(CredentialRecord(account: alice, refreshToken: "refresh-dead"))
        #expect(await vault.enqueueDelete(for: alice, ifHolding: "refresh-dead").value == nil)
        #expect(await store.load(for: alice) == nil)
    }
}
