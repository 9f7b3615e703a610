import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `SessionManager.session(for:)`: a server instance finds a user's session in the shared store (issue 51).
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SessionLoadingTests {
    /// Signs `user` in through a manager of its own over `store` (as another instance would), then forgets that
    /// manager without signing out.
    static func seed(_ user: String, _ mock: MockAuthorizationServer, store: any CredentialStore) async throws
        -> Account
    {
        try mock.addUser(user)
        let account = Account(issuer: mock.issuer, subject: user)
        let other = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
        let session = try await other.signIn(account, tokens: try mock.issueTokens(for: user))
        session.end()
        return account
    }

    @Test func aStoredAccountLoadsOnceLiveNotCurrentAndAnswersRequests() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            let store = InMemoryCredentialStore()
            let alice = try await Self.seed("alice", mock, store: store)
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
            let loaded = try #require(try await manager.session(for: alice))
            #expect(loaded.isActive)
            #expect(manager.current == nil, "a server has no current user: loading makes nobody current")
            #expect(manager.sessions.count == 1)
            let again = try await manager.session(for: alice)
            #expect(again === loaded, "a live session is the one returned")
            let (_, response) = try await loaded.data(for: URLRequest(url: mock.userInfoEndpoint))
            #expect(response.statusCode == 200)
        }
    }

    @Test func concurrentLoadsOfOneAccountMakeOneSession() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            let store = InMemoryCredentialStore()
            let alice = try await Self.seed("alice", mock, store: store)
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
            let loaded = await withTaskGroup(of: UserSession?.self) { group in
                for _ in 0..<32 { group.addTask { try? await manager.session(for: alice) } }
                var all: [UserSession?] = []
                for await session in group { all.append(session) }
                return all
            }
            let first = try #require(loaded.first ?? nil)
            #expect(loaded.allSatisfy { $0 === first }, "every caller gets the session installed first")
            #expect(manager.sessions.count == 1)
            #expect(first.isActive)
        }
    }

    @Test func anAccountWithoutARecordLoadsNothing() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            let store = InMemoryCredentialStore()
            let alice = try await Self.seed("alice", mock, store: store)
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
            #expect(try await manager.session(for: Account(issuer: mock.issuer, subject: "nobody")) == nil)
            let session = try #require(try await manager.session(for: alice))
            await manager.signOut(session)
            #expect(!session.isActive)
            #expect(try await manager.session(for: alice) == nil, "signed out: the record is gone")
            #expect(manager.sessions.isEmpty)
        }
    }

    @Test func aStoreThatCannotBeReachedThrowsAndSignsNobodyOut() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            let store = RefusingStore()
            let alice = try await Self.seed("alice", mock, store: store)
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
            store.refusal.withLock { $0 = SessionError(.storeUnavailable, "the database is down") }
            let error = await #expect(throws: SessionError.self) { _ = try await manager.session(for: alice) }
            #expect(error?.code == .storeUnavailable)
            store.refusal.withLock { $0 = nil }
            #expect(try await store.load(for: alice) != nil, "nothing was deleted")
            let session = try #require(try await manager.session(for: alice), "loads once the store answers")
            #expect(session.isActive)
        }
    }
}
