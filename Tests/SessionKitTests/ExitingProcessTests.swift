import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// A process that exits the moment its work is done, as a command-line tool does: what SessionKit still had to do
/// (delete a rejected record, revoke at sign-out) is either done before it exits or reported as left undone, and the
/// next launch never finds a dead token to present.
///
/// The child is `SessionKitCrashChild exit-after` (see its header): its store takes 300 ms per deletion, so an exit
/// that does not wait for one loses it every time rather than now and then. The rejections come from
/// django-oauth-toolkit, which answers a revoked refresh token with `invalid_grant`.
@Suite(
    .timeLimit(.minutes(2)),
    .enabled(
        if: AuthorizationServerFixture.shouldRun,
        "no authorization server: run scripts/test, which starts django-oauth-toolkit on loopback"
    )
)
struct ExitingProcessTests {
    typealias Fixture = AuthorizationServerFixture

    /// A token endpoint that records what a later launch presents, and presents nothing to a server.
    private final class RecordingEndpoint: TokenEndpoint {
        let presented = Lock<[String]>([])

        func refresh(using refreshToken: String) async throws -> TokenSet {
            presented.withLock { $0.append(refreshToken) }
            throw SessionError(.networkUnavailable, "the next launch is offline")
        }
    }

    /// Where nothing listens: the sign-out scenarios never refresh.
    private static let unused = URL(string: "http://127.0.0.1:9/unused")!

    /// Runs the child through `scenario` to its exit.
    private static func run(
        _ scenario: String, directory: URL, tokenEndpoint: URL = unused, clientID: String = "unused",
        resource: URL = unused
    ) throws -> (lines: [String], status: Int32) {
        let executable = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
        let child = try ChildProcess(
            executable,
            [
                "exit-after", scenario, directory.path, tokenEndpoint.absoluteString, clientID,
                resource.absoluteString,
            ])
        let (output, status) = child.finish()
        return (output.split(separator: "\n").map(String.init), status)
    }

    /// Stores `account`'s record as a previous run left it.
    private static func seed(
        _ account: Account, in directory: URL, refreshToken: String, accessToken: String, expiresAt: Date
    ) async throws {
        try await FileCredentialStore(directory: directory).save(
            CredentialRecord(
                account: account, refreshToken: refreshToken, accessToken: accessToken,
                accessTokenExpiresAt: expiresAt))
    }

    /// Launches again over `directory`: what is stored, and which refresh tokens the launch presented.
    private static func nextLaunch(
        _ account: Account, in directory: URL
    ) async throws -> (record: CredentialRecord?, presented: [String], sessions: Int) {
        let endpoint = RecordingEndpoint()
        let store = try FileCredentialStore(directory: directory)
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: endpoint))
        await manager.restore()
        let sessions = manager.sessions.count
        for session in manager.sessions { session.end() }
        return (try await store.load(for: account), endpoint.presented.withLock { $0 }, sessions)
    }

    /// A grant of a new user of the test server, with its refresh token revoked (and its access token, if asked):
    /// the next refresh is rejected with `invalid_grant`.
    private static func revokedGrant(
        _ server: Fixture, revokingAccessToken: Bool
    ) async throws -> (account: Account, tokens: Fixture.Tokens) {
        let user = try await server.createUser()
        let tokens = try await server.passwordGrant(user)
        let refreshToken = try #require(tokens.refresh)
        if revokingAccessToken {
            #expect(try await server.revoke(tokens.access, hint: "access_token").status == 200)
        }
        #expect(try await server.revoke(refreshToken, hint: "refresh_token").status == 200)
        #expect(try await server.refresh(refreshToken).status == 400, "the revoked refresh token still works")
        return (Account(issuer: server.baseURL.absoluteString, subject: user.username), tokens)
    }

    /// With a store other processes share, the rejected refresh deletes the record itself under the cross-process
    /// lock; with one they do not, the deletion is the vault's queued one, which restore waits for within its
    /// budget. Both must leave nothing behind.
    @Test(arguments: ["restore-rejected", "restore-rejected-unlocked"])
    func aToolThatRestoresAndExitsAtOnceAfterTheRefreshTokenIsRejectedLeavesNoRecordBehind(
        scenario: String
    ) async throws {
        let server = try Fixture.required()
        let (account, tokens) = try await Self.revokedGrant(server, revokingAccessToken: false)
        try await TemporaryDirectory.with { root in
            let directory = root.appendingPathComponent("credentials")
            try await Self.seed(
                account, in: directory, refreshToken: tokens.refresh ?? "", accessToken: tokens.access,
                expiresAt: Date(timeIntervalSinceNow: -60))

            let (lines, status) = try Self.run(
                scenario, directory: directory, tokenEndpoint: server.url("/o/token/"),
                clientID: Fixture.passwordClientID)

            #expect(status == 0, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("state ") && $0.contains("reauthenticationRequired") }, "\(lines)")
            let next = try await Self.nextLaunch(account, in: directory)
            #expect(next.record == nil, "restore returned before the rejected record was deleted")
            #expect(next.presented.count == 0, "the next launch presented the dead refresh token")
            #expect(next.sessions == 0)
        }
    }

    @Test func aToolThatWaitsForPendingWorkAfterARequestsRefreshIsRejectedLeavesNoRecordBehind() async throws {
        let server = try Fixture.required()
        let (account, tokens) = try await Self.revokedGrant(server, revokingAccessToken: true)
        try await TemporaryDirectory.with { root in
            let directory = root.appendingPathComponent("credentials")
            try await Self.seed(
                account, in: directory, refreshToken: tokens.refresh ?? "", accessToken: tokens.access,
                expiresAt: Date(timeIntervalSinceNow: 3600))

            let (lines, status) = try Self.run(
                "request-rejected", directory: directory, tokenEndpoint: server.url("/o/token/"),
                clientID: Fixture.passwordClientID, resource: server.url("/api/me"))

            #expect(status == 0, "\(lines)")
            #expect(lines == ["left no pending work"])
            let next = try await Self.nextLaunch(account, in: directory)
            #expect(next.record == nil, "finishPendingWork returned before the rejected record was deleted")
            #expect(next.presented.count == 0, "the next launch presented the dead refresh token")
        }
    }

    /// Runs a sign-out scenario over a record of alice that needs no refresh: what the child printed, its exit
    /// status, and what the next launch found.
    private static func signOutAndExit(
        _ scenario: String
    ) async throws -> (
        lines: [String], status: Int32, next: (record: CredentialRecord?, presented: [String], sessions: Int)
    ) {
        let account = Account(issuer: "https://exit.sessionkit.invalid", subject: "alice")
        return try await TemporaryDirectory.with { root in
            let directory = root.appendingPathComponent("credentials")
            try await seed(
                account, in: directory, refreshToken: "rt-alice", accessToken: "at-alice",
                expiresAt: Date(timeIntervalSinceNow: 3600))
            let (lines, status) = try run(scenario, directory: directory)
            return (lines, status, try await nextLaunch(account, in: directory))
        }
    }

    @Test func aToolThatSignsOutWithoutWaitingForTheServerStillRevokesBeforeItExits() async throws {
        let (lines, status, next) = try await Self.signOutAndExit("sign-out-slow")
        #expect(status == 0, "\(lines)")
        #expect(lines == ["revoked", "left no pending work"], "the revocation did not finish before the exit")
        #expect(next.record == nil)
    }

    @Test func aToolThatSignsOutWhileTheServerHangsIsToldTheRevocationIsLeftAndKeepsNoRecord() async throws {
        let (lines, status, next) = try await Self.signOutAndExit("sign-out-hung")
        #expect(status == 0, "\(lines)")
        #expect(lines == ["left 1 sign-out server steps still pending"])
        #expect(next.record == nil)
        #expect(next.presented.count == 0)
    }
}
