import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit

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

    // MARK: - Descriptors

    /// Open file descriptors of this process. Other tests run in parallel and open some too, so the assertions
    /// leave a wide margin: the leak they catch is 2 descriptors for each of 200 objects.
    private static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    /// Waits (at most 10 s) until at most `limit` descriptors are open: an invalidated URLSession closes its own on
    /// a queue of its own.
    private static func descriptorsSettle(atMost limit: Int) async -> Int {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        var open = openDescriptors()
        while open > limit, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
            open = openDescriptors()
        }
        return open
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/fd")))
    func aSessionDroppedWithoutEndReleasesItsURLSession() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/me") { _ in .json("{}") }
            let before = Self.openDescriptors()
            weak var probe: UserSession?
            do {
                var sessions: [UserSession] = []
                for index in 0..<200 {
                    sessions.append(UserSession(account: alice, tokens: tokens("alice-\(index)")))
                }
                // One of them has sent a request, so its task and completion handler existed: they must not keep
                // the session alive either.
                _ = try await sessions[0].data(for: URLRequest(url: server.url("/me")))
                probe = sessions[0]
                #expect(Self.openDescriptors() >= before + 200, "each live session holds descriptors")
            }
            #expect(probe == nil, "something still holds a dropped session")
            let after = await Self.descriptorsSettle(atMost: before + 50)
            #expect(after <= before + 50, "\(after - before) descriptors more than before 200 dropped sessions")
        }
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/fd")))
    func aReleasedOAuthClientReleasesItsURLSession() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            try mock.addUser("alice")
            let refreshToken = try #require(try mock.issueTokens(for: "alice").refreshToken)
            let before = Self.openDescriptors()
            weak var probe: OAuthClient?
            do {
                let clients = (0..<200).map { _ in mock.makeClient() }
                _ = try await clients[0].refresh(using: refreshToken)
                probe = clients[0]
                #expect(Self.openDescriptors() >= before + 200, "each client holds descriptors")
            }
            #expect(probe == nil, "something still holds a released client")
            let after = await Self.descriptorsSettle(atMost: before + 50)
            #expect(after <= before + 50, "\(after - before) descriptors more than before 200 released clients")
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

        #expect(vault.accountsWithQueues == 0)
        #expect(try await vault.load(for: account)?.refreshToken == "refresh-kept")
        #expect(vault.accountsWithQueues == 0)
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
