import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Several processes on one credential store refresh an account once between them (issue 17).
///
/// Each test starts `SessionKitCrashChild refresh-burst` children (see its header) over one `FileCredentialStore`
/// opened with `coordinatingProcesses`, against the mock authorization server with rotation and reuse detection.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct CrossProcessRefreshTests {
    static let processes = 4
    static let requestsEach = 16

    /// Signs alice in once, in this process, so that every child restores the same record (access token included,
    /// as a coordinated store keeps it), then ends that session without signing out.
    static func seed(_ mock: MockAuthorizationServer, directory: URL) async throws -> Account {
        try mock.addUser("alice")
        let account = Account(issuer: mock.issuer, subject: "alice")
        let store = try FileCredentialStore(directory: directory, coordinatingProcesses: true)
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
        let session = try await manager.signIn(account, tokens: try mock.issueTokens(for: "alice"))
        session.end()
        return account
    }

    @Test func fourProcessesWhoseSixteenRequestsAllGet401RefreshOnceBetweenThem() async throws {
        let executable = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
        try await TemporaryDirectory.with { root in
            try await MockAuthorizationServer.withRunning { mock in
                let directory = root.appendingPathComponent("credentials")
                let account = try await Self.seed(mock, directory: directory)
                // Every request of every child is answered 401, and only once all of them have arrived.
                mock.invalidateAccessTokens(for: "alice")
                let arrivals = Gate()
                let total = Self.processes * Self.requestsEach
                for _ in 0..<total { mock.holdNext(.resource, at: arrivals) }

                let burst = try await RefreshBurst.start(
                    executable, count: Self.processes, directory: directory, tokenEndpoint: mock.tokenEndpoint,
                    clientID: MockAuthorizationServer.Configuration().clientID, resource: mock.userInfoEndpoint,
                    requests: Self.requestsEach)
                burst.go()
                await arrivals.waitForArrivals(total)
                arrivals.open()
                let outcomes = await burst.outcomes()

                for (index, outcome) in outcomes.enumerated() {
                    #expect(outcome.status == 0, "child \(index) exited with \(outcome.status): \(outcome.lines)")
                    #expect(outcome.done?.succeeded == Self.requestsEach, "child \(index): \(outcome.lines)")
                }
                #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
                #expect(mock.repeatedRefreshTokenCount == 0)
                #expect(mock.reuseDetectionCount == 0)
                let record = try await FileCredentialStore(directory: directory).load(for: account)
                let stored = try #require(record?.refreshToken)
                #expect(mock.isActive(token: stored), "the stored refresh token is not the live one")
            }
        }
    }
}
