import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A refresh token the server answers with a bare `400` and no OAuth error body (issue 47): the grant is rejected,
/// as `invalid_grant` would say, not an outage. Retrying presents the same dead token, so the session ends and the
/// user is asked to sign in again; left active, it would fail every refresh and never ask. Other statuses without
/// an OAuth body, and a 400 to another grant, say nothing about the refresh token and are not taken for it.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct DeadRefreshTokenTests {
    @Test func aBare400ToARefreshIsTheGrantRejectedAndIsNotRetried() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            mock.failNext(.token, with: .bareStatus(400))
            let error = await #expect(throws: SessionError.self) { try await mock.makeClient().refresh(using: refresh) }
            #expect(error?.code == .refreshRejected)
            #expect(error?.statusCode == 400)
            #expect(error?.oauthError == nil)
            #expect(error?.isTransient == false)
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
        }
    }

    @Test func aManagedSessionWhoseRefreshIsAnsweredABare400AsksToSignInAgain() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let store = InMemoryCredentialStore()
            let client = mock.makeClient()
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: client, revoker: client))
            let session = try await manager.signIn(alice, tokens: try mock.issueTokens(for: "alice"))
            mock.invalidateAccessTokens(for: "alice")
            mock.failNext(.token, with: .bareStatus(400))

            let error = await #expect(throws: SessionError.self) {
                try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            }
            #expect(error?.code == .refreshRejected)
            #expect(!session.isActive)
            #expect(manager.current == nil)
            #expect(manager.state == .reauthenticationRequired(alice))
            // One refresh: the dead token was not presented again, as a transient failure's would be.
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            _ = await manager.finishPendingWork(within: .seconds(5))
            #expect(await store.load(for: alice) == nil)
        }
    }

    @Test(arguments: [401, 403, 404])
    func otherBareStatusesToARefreshLeaveTheGrantAlone(status: Int) async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let client = mock.makeClient()
            let manager = SessionManager(
                configuration: .init(store: InMemoryCredentialStore(), tokenEndpoint: client, revoker: client))
            let session = try await manager.signIn(alice, tokens: try mock.issueTokens(for: "alice"))
            mock.invalidateAccessTokens(for: "alice")
            mock.failNext(.token, with: .bareStatus(status))

            // A proxy's 401 or 403, a wrong endpoint's 404: nothing about the refresh token.
            let error = await #expect(throws: SessionError.self) {
                try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            }
            #expect(error?.code == .authorizationFailed)
            #expect(error?.statusCode == status)
            #expect(session.isActive)
            #expect(manager.current === session)
            session.end()
        }
    }

    @Test func a400NamingAnotherOAuthErrorKeepsIt() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let refresh = try #require(try mock.issueTokens(for: "alice").refreshToken)
            mock.failNext(.token, with: .oauthError("invalid_request", status: 400))
            let error = await #expect(throws: SessionError.self) { try await mock.makeClient().refresh(using: refresh) }
            #expect(error?.code == .authorizationFailed)
            #expect(error?.oauthError == "invalid_request")
        }
    }

    @Test func aBare400ToAPasswordGrantIsNotARejectedRefresh() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            mock.failNext(.token, with: .bareStatus(400))
            let error = await #expect(throws: SessionError.self) {
                _ = try await mock.makeClient().password(username: "alice", password: "password")
            }
            #expect(error?.code == .authorizationFailed)
            #expect(error?.statusCode == 400)
        }
    }
}
