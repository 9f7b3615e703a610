import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// A grant the server rejects in this process, on a store shared with other processes: the refresher deletes the
/// record under the account's lock and announces the change, and this process hears its own notice too. That notice
/// must not end the session as "signed out elsewhere": the user is asked to sign in again
/// (`reauthenticationRequired`), exactly as on a store no other process shares. (Found by `ExitingProcessTests`
/// failing one run in five: a command-line tool whose restore met a rejected grant reported `signedOut`.)
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct OwnChangeNoticeTests {
    static let alice = Account(issuer: "https://id.sessionkit.test", subject: "alice")

    /// The file store, except that a deletion also announces the change at once and returns only after the manager
    /// has checked its sessions against the store: the check then runs while the refresher still holds the lock,
    /// before it reports the rejection, which is the order that lost the rejection. Without it that order is a race.
    final class CheckedOnDeleteStore: CredentialStore {
        let inner: FileCredentialStore
        let recorder: DiagnosticsTests.Recorder
        let deletions = Lock(0)

        init(_ inner: FileCredentialStore, _ recorder: DiagnosticsTests.Recorder) {
            self.inner = inner
            self.recorder = recorder
        }

        var refreshLock: CrossProcessLock? { inner.refreshLock }
        func save(_ record: CredentialRecord) async throws { try await inner.save(record) }
        func load(for account: Account) async throws -> CredentialRecord? { try await inner.load(for: account) }
        func deleteAll() async throws { try await inner.deleteAll() }
        func accounts() async throws -> [Account] { try await inner.accounts() }

        func delete(for account: Account) async throws {
            try await inner.delete(for: account)
            deletions.withLock { $0 += 1 }
            let before = checks()
            inner.refreshLock?.announceChange()
            let checked = await eventually(within: .seconds(30)) { self.checks() > before }
            #expect(checked, "the manager never checked its sessions after the notice")
        }

        func checks() -> Int { recorder.recorded.filter { $0.kind == .crossProcessReconciled }.count }
    }

    @Test func aGrantRejectedHereIsNotReadAsASignOutInAnotherProcess() async throws {
        try await TemporaryDirectory.with { root in
            let recorder = DiagnosticsTests.Recorder()
            let file = try FileCredentialStore(directory: root.appendingPathComponent("credentials"))
            try #require(file.refreshLock != nil, "the file store coordinates processes by default")
            let store = CheckedOnDeleteStore(file, recorder)
            let endpoint = ScriptedTokenEndpoint { _, _ in
                throw SessionError(.refreshRejected, "invalid_grant", statusCode: 400, oauthError: "invalid_grant")
            }
            let manager = SessionManager(
                configuration: .init(
                    store: store, tokenEndpoint: endpoint,
                    sessionConfiguration: .init(diagnostics: recorder.diagnostics)))
            let session = try await manager.signIn(
                Self.alice, tokens: TokenSet(accessToken: "token-alice", refreshToken: "refresh-alice", lifetime: nil))

            await #expect(throws: SessionError.self) { try await session.refreshTokens() }

            #expect(store.deletions.withLock { $0 } >= 1, "the rejected record was deleted under the lock")
            #expect(manager.state == .reauthenticationRequired(Self.alice))
            #expect(!recorder.recorded.contains { $0.kind == .signedOutElsewhere })
            #expect(try await file.load(for: Self.alice) == nil)
        }
    }
}
