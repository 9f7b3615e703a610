import Foundation
import SessionKit
import Testing

/// `SessionManager.session(for:)` against a sign-out on another instance that lands while the load runs.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SessionLoadingRaceTests {
    /// A store whose first read of an account answers the record it held before another instance deleted it: the
    /// load read it an instant before the deletion, whose notice then found no session of it here to end.
    actor ReadBeforeDeletion: CredentialStore {
        let inner: InMemoryCredentialStore
        private var stale: CredentialRecord?

        init(_ inner: InMemoryCredentialStore, stale: CredentialRecord) {
            self.inner = inner
            self.stale = stale
        }

        func save(_ record: CredentialRecord) async throws { await inner.save(record) }
        func load(for account: Account) async throws -> CredentialRecord? {
            if let stale {
                self.stale = nil
                return stale
            }
            return await inner.load(for: account)
        }
        func delete(for account: Account) async throws { await inner.delete(for: account) }
        func deleteAll() async throws { await inner.deleteAll() }
        func accounts() async throws -> [Account] { await inner.accounts() }
    }

    @Test func anAccountSignedOutElsewhereWhileItLoadsIsNotLoaded() async throws {
        let account = Account(issuer: "https://loading.sessionkit.invalid", subject: "alice")
        let shared = InMemoryCredentialStore()
        let elsewhere = SessionManager(configuration: .init(store: shared))
        let signedIn = try await elsewhere.signIn(
            account, tokens: TokenSet(accessToken: "a", refreshToken: "r", lifetime: .seconds(600), receivedAt: .now))
        let stale = try #require(await shared.load(for: account))
        await elsewhere.signOut(signedIn)

        let manager = SessionManager(configuration: .init(store: ReadBeforeDeletion(shared, stale: stale)))
        #expect(try await manager.session(for: account) == nil)
        #expect(manager.sessions.isEmpty)
    }
}
