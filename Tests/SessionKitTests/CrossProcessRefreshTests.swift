import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Several processes on one credential store refresh an account once between them (issue 17).
///
/// Each test starts `SessionKitCrashChild refresh-burst` children (see its header) over one `FileCredentialStore`
/// as it opens by default (coordinating processes, issue 35), against the mock authorization server with rotation
/// and reuse detection.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct CrossProcessRefreshTests {
    static let processes = 4
    static let requestsEach = 16

    /// Signs alice in once, in this process, so that every child restores the same record (access token included,
    /// as a coordinated store keeps it), then ends that session without signing out.
    static func seed(_ mock: MockAuthorizationServer, directory: URL) async throws -> Account {
        try mock.addUser("alice")
        let account = Account(issuer: mock.issuer, subject: "alice")
        let store = try FileCredentialStore(directory: directory)
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

    /// Two managers on one directory, as two processes are (each opens the store and the lock itself).
    static func manager(_ mock: MockAuthorizationServer, directory: URL) throws -> SessionManager {
        SessionManager(
            configuration: .init(
                store: try FileCredentialStore(directory: directory),
                tokenEndpoint: mock.makeClient(), revoker: mock.makeClient()))
    }

    /// Two processes' managers on one store seeded with alice's grant, both restored: what every test of one
    /// process seeing another's change starts from.
    static func twoRestored(
        _ mock: MockAuthorizationServer, directory: URL
    ) async throws -> (account: Account, first: SessionManager, second: SessionManager) {
        let account = try await seed(mock, directory: directory)
        let first = try manager(mock, directory: directory)
        let second = try manager(mock, directory: directory)
        await first.restore()
        await second.restore()
        return (account, first, second)
    }

    @Test func aSignOutInOneProcessEndsTheOthersSessionAtItsNextUseWithoutPresentingOrRestoringTheGrant()
        async throws
    {
        try await TemporaryDirectory.with { root in
            try await MockAuthorizationServer.withRunning { mock in
                let directory = root.appendingPathComponent("credentials")
                let (account, here, elsewhere) = try await Self.twoRestored(mock, directory: directory)
                let session = try #require(elsewhere.current)
                _ = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))

                // When: one process signs alice out (revoking her grant, deleting the shared record).
                await here.signOut()

                // Then: the other's next request ends its session instead of presenting the revoked grant.
                await #expect(throws: SessionError.self) {
                    _ = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
                }
                #expect(!session.isActive)
                #expect(elsewhere.current == nil)
                #expect(elsewhere.sessions.isEmpty)
                #expect(elsewhere.state == .signedOut)
                #expect(mock.tokenRequestCount(grant: .refreshToken) == 0, "the revoked grant was presented")
                #expect(try await FileCredentialStore(directory: directory).load(for: account) == nil)
            }
        }
    }

    @Test func aRefreshThatFindsTheRecordGoneEndsTheSessionAndWritesNothingBack() async throws {
        try await TemporaryDirectory.with { root in
            try await MockAuthorizationServer.withRunning { mock in
                let directory = root.appendingPathComponent("credentials")
                let account = try await Self.seed(mock, directory: directory)
                let manager = try Self.manager(mock, directory: directory)
                await manager.restore()
                let session = try #require(manager.current)
                // Another process's sign-out, reduced to what this one can see: the record is gone.
                try await FileCredentialStore(directory: directory).delete(for: account)

                await #expect(throws: SessionError.self) { try await session.refreshTokens() }
                #expect(!session.isActive)
                #expect(manager.current == nil)
                #expect(mock.tokenRequestCount(grant: .refreshToken) == 0)
                #expect(try await FileCredentialStore(directory: directory).load(for: account) == nil)
            }
        }
    }

    @Test func aWaitingProcessUsesTheTokensAnotherStoredInsteadOfRefreshing() async throws {
        try await TemporaryDirectory.with { root in
            try await MockAuthorizationServer.withRunning { mock in
                let directory = root.appendingPathComponent("credentials")
                let (_, first, second) = try await Self.twoRestored(mock, directory: directory)
                let one = try #require(first.current)
                let two = try #require(second.current)
                mock.invalidateAccessTokens(for: "alice")

                _ = try await one.data(for: URLRequest(url: mock.userInfoEndpoint))
                _ = try await two.data(for: URLRequest(url: mock.userInfoEndpoint))

                #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
                #expect(mock.repeatedRefreshTokenCount == 0)
                #expect(one.tokens?.accessToken == two.tokens?.accessToken)
                #expect(one.tokens?.refreshToken == two.tokens?.refreshToken)
            }
        }
    }
}

extension CrossProcessRefreshTests {
    /// Another process rotated the refresh token, and the access token it stored has expired too: this process
    /// presents the stored (newest) refresh token, never the one it holds, which the server has retired (with reuse
    /// detection, presenting it revokes the grant).
    @Test func aRefreshAfterAnotherProcessRotatedAndItsAccessTokenExpiredPresentsTheStoredRefreshToken()
        async throws
    {
        try await TemporaryDirectory.with { root in
            try await MockAuthorizationServer.withRunning { mock in
                let directory = root.appendingPathComponent("credentials")
                let (account, first, second) = try await Self.twoRestored(mock, directory: directory)
                let one = try #require(first.current)
                let two = try #require(second.current)
                let retired = try #require(two.tokens?.refreshToken)
                try await one.refreshTokens()
                // The access token the first process stored has expired since.
                let store = try FileCredentialStore(directory: directory)
                var record = try #require(try await store.load(for: account))
                #expect(record.refreshToken != retired)
                record.accessTokenExpiresAt = Date().addingTimeInterval(-1)
                try await store.save(record)

                try await two.refreshTokens()

                #expect(mock.reuseDetectionCount == 0, "the retired refresh token was presented")
                #expect(mock.repeatedRefreshTokenCount == 0)
                #expect(mock.tokenRequestCount(grant: .refreshToken) == 2)
                #expect(two.isActive)
                let stored = try #require(try await store.load(for: account)?.refreshToken)
                #expect(stored == two.tokens?.refreshToken)
                #expect(mock.isActive(token: stored))
            }
        }
    }

    @Test func aSwitchNeverWritesBackARefreshTokenAnotherProcessRotated() async throws {
        try await TemporaryDirectory.with { root in
            try await MockAuthorizationServer.withRunning { mock in
                let directory = root.appendingPathComponent("credentials")
                let alice = try await Self.seed(mock, directory: directory)
                try mock.addUser("bob")
                let here = try Self.manager(mock, directory: directory)
                let elsewhere = try Self.manager(mock, directory: directory)
                await elsewhere.restore()
                let stale = try #require(elsewhere.current)
                _ = try await elsewhere.signIn(
                    Account(issuer: mock.issuer, subject: "bob"), tokens: try mock.issueTokens(for: "bob"))
                await here.restore()
                // This process rotates alice's refresh token; the other still holds the old one in memory.
                try await #require(here.sessions.first { $0.account == alice }).refreshTokens()

                let store = try FileCredentialStore(directory: directory)
                let before = try await store.load(for: alice)?.selectedAt
                try await elsewhere.switchTo(stale)
                // The switch stores the selection on its own; wait (bounded) until it has.
                var record = try await store.load(for: alice)
                let deadline = ContinuousClock.now.advanced(by: .seconds(10))
                while record?.selectedAt == before, ContinuousClock.now < deadline {
                    await Task.yield()
                    record = try await store.load(for: alice)
                }
                #expect(record?.selectedAt != before, "the switch stored no selection")
                let stored = try #require(record?.refreshToken)
                #expect(mock.isActive(token: stored), "the switch wrote back a retired refresh token")
            }
        }
    }
}

/// The lock itself: exclusion, its bound, descriptors a child process does not inherit, and bad paths.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct CrossProcessLockTests {
    @Test func aSecondHolderWaitsAtMostTheTimeoutThenFailsWithRefreshTimedOut() async throws {
        try await TemporaryDirectory.with { root in
            let lock = CrossProcessLock(file: root.appendingPathComponent("refresh.lock"), timeout: .milliseconds(50))
            let held = try await lock.acquire()
            let error = await #expect(throws: SessionError.self) { _ = try await lock.acquire() }
            #expect(error?.code == .refreshTimedOut)
            held.release()
            try await lock.withLock(for: CredentialStoreContract.account(1)) {}
        }
    }

    @Test func aChildProcessStartedWhileTheLockIsHeldDoesNotKeepIt() async throws {
        let sleep = try #require(ChildProcess.tool("sleep"))
        try await TemporaryDirectory.with { root in
            let lock = CrossProcessLock(file: root.appendingPathComponent("refresh.lock"), timeout: .milliseconds(50))
            let held = try await lock.acquire()
            let child = try ChildProcess(sleep, ["30"])
            defer { _ = child.kill() }
            held.release()
            // With the descriptor inherited (no O_CLOEXEC), the child would hold the lock for 30 seconds.
            try await lock.withLock(for: CredentialStoreContract.account(1)) {}
        }
    }

    @Test(arguments: ["missing/refresh.lock", "directory", "link"])
    func aLockFileThatCannotBeOpenedIsAStorageFailure(_ name: String) async throws {
        try await TemporaryDirectory.with { root in
            let file = root.appendingPathComponent(name)
            if name == "directory" {
                try FileManager.default.createDirectory(at: file, withIntermediateDirectories: false)
            }
            if name == "link" {
                try FileManager.default.createSymbolicLink(
                    at: file, withDestinationURL: root.appendingPathComponent("elsewhere"))
            }
            let error = await #expect(throws: SessionError.self) {
                _ = try await CrossProcessLock(file: file, timeout: .milliseconds(50)).acquire()
            }
            #expect(error?.code == .storageFailure)
        }
    }
}
