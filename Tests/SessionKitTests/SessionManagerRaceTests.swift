import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// A credential store that holds the save of one chosen refresh token at a gate.
private final class GatedCredentialStore: CredentialStore {
    let inner = InMemoryCredentialStore()
    let gate = Gate()
    let heldToken: String

    init(holding heldToken: String) {
        self.heldToken = heldToken
    }

    func save(_ record: CredentialRecord) async throws {
        if record.refreshToken == heldToken { await gate.wait() }
        await inner.save(record)
    }

    func load(for account: Account) async throws -> CredentialRecord? { await inner.load(for: account) }
    func delete(for account: Account) async throws { await inner.delete(for: account) }
    func deleteAll() async throws { await inner.deleteAll() }
    func accounts() async throws -> [Account] { await inner.accounts() }
}

/// Races between sign-in, sign-out and refresh of one account that `InterleavingTests` found; each test orders
/// the race with gates so it fails the same way every time on the code before the fix.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct SessionManagerRaceTests {
    /// Found as "signOutStale": signing out a session that a re-login of the same account already replaced
    /// purged the account, and with it the credentials of the live session that replaced it.
    @Test func signingOutAReplacedSessionLeavesItsReplacementAlone() async throws {
        let store: any CredentialStore = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store))
        let first = try await manager.signIn(alice, tokens: tokens("alice"))
        let second = try await manager.signIn(alice, tokens: tokens("alice-2"))
        #expect(!first.isActive)

        let report = try #require(await manager.signOut(first, options: .localOnly))

        #expect(report.account == alice)
        #expect(report.purgeIntent == .notRequested && report.credentialDeletion == .notRequested)
        #expect(report.resourcePurges.isEmpty)
        #expect(report.directoryRemoval == .notRequested && report.refreshTokenRevocation == .notRequested)
        #expect(second.isActive)
        #expect(manager.current === second)
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice-2")
    }

    /// Found as "live but the store holds nothing": a sign-in of an account whose sign-out was still revoking
    /// did not wait for that sign-out, whose purge then deleted the new session's credentials.
    @Test func signInWaitsForTheSameAccountsSignOutInProgress() async throws {
        let revocation = Gate()
        let store: any CredentialStore = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store, revoker: ScriptedRevoker(gate: revocation)))
        try await manager.signIn(alice, tokens: tokens("alice"))
        let signOut = Task { await manager.signOut() }
        await revocation.waitForArrivals(1)  // detached and ended; revocation, then the purge, to come

        // The sign-in lets the revocation finish the moment it has its tokens, so the purge races the sign-in's
        // own write unless the sign-in waits for the sign-out.
        let second = try await manager.signIn { [account = alice] in
            revocation.open()
            return (account, tokens("alice-2"))
        }
        let report = try #require(await signOut.value)

        #expect(report.credentialDeletion == .succeeded)
        #expect(second.isActive)
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice-2")
    }

    /// Found as "the store holds #1's refresh token for live #2": a refresh of the session a re-login replaces
    /// committed while the new session's record was being written, and its write landed last.
    @Test func aReplacedSessionsRefreshCannotOverwriteItsReplacementsRecord() async throws {
        let endpointGate = Gate()
        let endpoint = ScriptedTokenEndpoint(gate: endpointGate) { _, n in
            TokenSet(accessToken: "token-alice-old-\(n)", refreshToken: "refresh-alice-old-\(n)")
        }
        let store = GatedCredentialStore(holding: "refresh-alice-2")
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: endpoint))
        let first = try await manager.signIn(alice, tokens: tokens("alice"))
        let refresh = Task { try await first.refreshTokens() }
        await endpointGate.waitForArrivals(1)

        let signIn = Task { try await manager.signIn(alice, tokens: tokens("alice-2")) }
        await store.gate.waitForArrivals(1)  // the new record is being written
        endpointGate.open()
        // Either the old session has ended (its result will be dropped) or it committed its rotated token.
        await eventually { !first.isActive || first.tokens?.refreshToken == "refresh-alice-old-1" }
        store.gate.open()
        let second = try await signIn.value
        _ = try? await refresh.value

        #expect(second.isActive)
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice-2")
    }
}
