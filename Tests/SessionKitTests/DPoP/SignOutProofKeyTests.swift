import Foundation
import SessionKit
import Testing

/// A store whose deletions fail: the record, and the DPoP key in it, stay.
final class UndeletableStore: CredentialStore {
    private let inner = InMemoryCredentialStore()
    func save(_ record: CredentialRecord) async throws { await inner.save(record) }
    func load(for account: Account) async throws -> CredentialRecord? { await inner.load(for: account) }
    func delete(for account: Account) async throws { throw SessionError(.storageFailure, "the disk is read-only") }
    func deleteAll() async throws { throw SessionError(.storageFailure, "the disk is read-only") }
    func accounts() async throws -> [Account] { await inner.accounts() }
}

/// What the sign-out report says of the DPoP key: destroyed exactly when the record holding it was deleted.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SignOutProofKeyTests {
    static func boundTokens() throws -> TokenSet {
        TokenSet(accessToken: "at", refreshToken: "rt", tokenType: "DPoP", proofKey: try DPoPKey.generate())
    }

    @Test func theKeyIsReportedDestroyedWhenItsRecordIsDeleted() async throws {
        let store = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store))
        try await manager.signIn(alice, tokens: try Self.boundTokens())
        #expect(await store.load(for: alice)?.proofKey != nil)
        let report = try #require(await manager.signOut())
        #expect(report.proofKeyDestruction == .succeeded)
        #expect(await store.load(for: alice) == nil)
    }

    @Test func aKeyWhoseRecordCouldNotBeDeletedIsReportedKept() async throws {
        let store = UndeletableStore()
        let manager = SessionManager(configuration: .init(store: store))
        try await manager.signIn(alice, tokens: try Self.boundTokens())
        let report = try #require(await manager.signOut(options: .localOnly))
        #expect(report.proofKeyDestruction == .failed(.storageFailure))
        #expect(!report.isPurgeComplete)
    }

    @Test func bearerTokensHaveNoKeyToDestroy() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        try await manager.signIn(alice, tokens: TokenSet(accessToken: "at", refreshToken: "rt"))
        #expect(try #require(await manager.signOut()).proofKeyDestruction == .notRequested)
    }
}
