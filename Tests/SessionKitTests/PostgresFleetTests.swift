import Foundation
import LoopbackPostgres
import SessionKit
import SessionKitPostgres
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// A fleet of server instances on one `PostgresCredentialStore` (issue 51): `SessionKitCrashChild` processes, each an
/// instance with its own store, against a real PostgreSQL of the test's own and an authorization server with
/// rotation and reuse detection. One refresh per account across the fleet, endings that reach every instance, a
/// lock holder killed at random instants, and a database stopped under load.
///
/// Serialized: each test drives four processes against a cluster and a server of its own, and two at once on a
/// loaded machine would measure each other.
@Suite(.enabled(if: LoopbackPostgres.shouldRun), .serialized)
struct PostgresFleetTests {
    typealias Fixture = AuthorizationServerFixture

    /// How many processes play the fleet.
    static let processes = 4
    /// Concurrent requests per account per process.
    static let requestsPerAccount = 8
    /// Accounts a process works on at once: 25 × 8 requests in flight per process keeps sockets far below the limit.
    static let window = 25

    static var fleetAccounts: Int {
        ProcessInfo.processInfo.environment["SESSIONKIT_VAULT_ACCOUNTS"].flatMap { Int($0) } ?? 1000
    }

    static var killRounds: Int {
        ProcessInfo.processInfo.environment["SESSIONKIT_VAULT_KILL_ROUNDS"].flatMap { Int($0) } ?? 50
    }

    static func crashChild() throws -> URL {
        try #require(
            ChildProcess.crashChild,
            "SessionKitCrashChild was not found next to the test bundle; build it, or set SESSIONKIT_CRASH_CHILD")
    }

    /// Signs each of `users` in through a manager over a store of its own (a user of the mock is added for each),
    /// and ends each session here: the records stay, as a fleet's database holds them.
    ///
    /// - Returns: The accounts, in the order of `users`.
    @discardableResult
    static func seed(_ users: [String], at mock: MockAuthorizationServer, in database: String) async throws
        -> [Account]
    {
        let store = try await PostgresCredentialStore.connect(to: database)
        defer { store.close() }
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
        let accounts = users.map { Account(issuer: mock.issuer, subject: $0) }
        for user in users { try mock.addUser(user) }
        // Eight sign-ins at a time: a thousand one after another would be most of the test.
        for batch in stride(from: 0, to: users.count, by: 8) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in batch..<min(batch + 8, users.count) {
                    let tokens = try mock.issueTokens(for: users[index])
                    group.addTask {
                        try await manager.signIn(accounts[index], tokens: tokens, makeCurrent: false).end()
                    }
                }
                try await group.waitForAll()
            }
        }
        return accounts
    }

    /// The value at `fraction` of `sorted` (nearest rank).
    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    // MARK: - One refresh per account across the fleet

    @Test(.timeLimit(.minutes(TimeLimit.scaled(15, by: "SESSIONKIT_VAULT_ACCOUNTS", reference: 1000))))
    func fourProcessesMakeExactlyOneRefreshPerAccountAndPresentNoTokenTwice() async throws {
        let executable = try Self.crashChild()
        let count = Self.fleetAccounts
        try await LoopbackPostgres.withRunning { cluster in
            let database = cluster.connectionString
            try await MockAuthorizationServer.withRunning { mock in
                // Given every account's access token dead at the server, in a store the fleet shares.
                let users = (0..<count).map { "fleet\($0)" }
                try await Self.seed(users, at: mock, in: database)
                for user in users { mock.invalidateAccessTokens(for: user) }
                let before = mock.tokenRequestCount

                // When four processes each send 8 concurrent requests per account, every account.
                let arguments = (0..<Self.processes).map { index in
                    [
                        "vault-fleet", mock.tokenEndpoint.absoluteString,
                        MockAuthorizationServer.Configuration().clientID, mock.userInfoEndpoint.absoluteString,
                        "\(Self.requestsPerAccount)", "\(Self.window)", "\(0xF1EE7 + index)",
                    ]
                }
                let (fleet, ready) = try await VaultChildren.start(executable, arguments, database: database)
                #expect(ready == Array(repeating: count, count: Self.processes))
                let started = ContinuousClock.now
                fleet.sendToAll("go")
                let outcomes = await fleet.outcomes()
                let took = ContinuousClock.now - started

                // Then every request succeeded, with one refresh per account in all.
                for (index, outcome) in outcomes.enumerated() {
                    #expect(outcome.status == 0, "child \(index) exited with \(outcome.status)")
                    #expect(
                        outcome.done?.succeeded == count * Self.requestsPerAccount,
                        "child \(index): \(outcome.failures) \(outcome.lines.last ?? "")")
                }
                let requests = mock.tokenRequestCount - before
                let reused = mock.repeatedRefreshTokenCount
                print(
                    "vault fleet: processes \(Self.processes), accounts \(count), token requests \(requests), "
                        + "reused \(reused) (in \(took.components.seconds) s)")
                #expect(requests == count)
                #expect(reused == 0)
                #expect(mock.reuseDetectionCount == 0)
            }
        }
    }

    @Test(
        .enabled(if: Fixture.shouldRun, "no authorization server: run scripts/test"),
        .timeLimit(.minutes(TimeLimit.heavy)))
    func fourProcessesAgainstDjangoOAuthToolkitMakeOneRefreshPerAccountAndSignNobodyOut() async throws {
        let executable = try Self.crashChild()
        let count = 20
        try await Fixture.withPrivateServer(settings: [
            "ROTATE_REFRESH_TOKEN": "True", "REFRESH_TOKEN_REUSE_PROTECTION": "True",
        ]) { server in
            try await LoopbackPostgres.withRunning { cluster in
                let database = cluster.connectionString
                let oauth = AuthorizationServerIntegrationTests.client(server)
                let store = try await PostgresCredentialStore.connect(to: database)
                defer { store.close() }
                let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth))
                // Given twenty users signed in with the password grant, each access token expired at the server.
                var users: [Fixture.User] = []
                for _ in 0..<count {
                    let user = try await server.createUser()
                    let session = try await manager.signIn(makeCurrent: false) {
                        [account = AuthorizationServerIntegrationTests.account(server, user)] in
                        (account, try await oauth.password(username: user.username, password: user.password))
                    }
                    try await server.expireAccessToken(try #require(session.tokens?.accessToken))
                    session.end()
                    users.append(user)
                }

                // When four processes send 8 concurrent requests for every account.
                let arguments = (0..<Self.processes).map { index in
                    [
                        "vault-fleet", server.url("/o/token/").absoluteString, Fixture.passwordClientID,
                        server.url("/api/me").absoluteString, "\(Self.requestsPerAccount)", "4", "\(0xD07 + index)",
                    ]
                }
                let (fleet, ready) = try await VaultChildren.start(executable, arguments, database: database)
                #expect(ready == Array(repeating: count, count: Self.processes))
                fleet.sendToAll("go")
                let outcomes = await fleet.outcomes()

                // Then one refresh per account, no token presented twice, and every account still signed in.
                for (index, outcome) in outcomes.enumerated() {
                    #expect(outcome.status == 0, "child \(index) exited with \(outcome.status)")
                    #expect(
                        outcome.done?.succeeded == count * Self.requestsPerAccount,
                        "child \(index): \(outcome.failures) \(outcome.lines.last ?? "")")
                }
                let names = Set(users.map(\.username))
                let refreshes = try await server.log().filter {
                    $0.grantType == "refresh_token" && names.contains($0.username ?? "")
                }
                let presented = refreshes.compactMap(\.refreshToken)
                #expect(Set(presented).count == presented.count, "a refresh token was presented twice")
                var signedOut = 0
                for user in users {
                    let account = AuthorizationServerIntegrationTests.account(server, user)
                    guard let stored = try await store.load(for: account)?.refreshToken,
                        try await server.refresh(stored).status == 200
                    else {
                        signedOut += 1
                        continue
                    }
                }
                print(
                    "vault fleet (django-oauth-toolkit): processes \(Self.processes), accounts \(count), "
                        + "token requests \(refreshes.count), signed out \(signedOut)")
                #expect(refreshes.count == count)
                #expect(signedOut == 0)
            }
        }
    }

    // MARK: - Endings

    /// One request to the watched resource, as the server saw it.
    struct Arrival: Sendable {
        let process: String
        let user: String
        let askedAt: UInt64
        let arrivedAt: UInt64
    }

    /// Records every authorized request to `/api/watch` in `arrivals`.
    static func watchRoute(on mock: MockAuthorizationServer, into arrivals: Locked<[Arrival]>) -> URL {
        mock.protectedRoute("GET", "/api/watch") { request, user in
            let arrivedAt = CrossProcessSignOutTests.monotonicNanoseconds()
            if let process = request.header("X-Process"), let asked = request.header("X-Asked-At").flatMap(UInt64.init)
            {
                arrivals.withLock {
                    $0.append(Arrival(process: process, user: user, askedAt: asked, arrivedAt: arrivedAt))
                }
            }
            return .json(#"{"ok":true}"#)
        }
        return mock.url("/api/watch")
    }

    @Test(.timeLimit(.minutes(TimeLimit.heavy)))
    func aSignOutInOneProcessEndsTheAccountInEveryOtherWithNoRequestAfter() async throws {
        let executable = try Self.crashChild()
        let endings = 200
        let followers = 3
        try await LoopbackPostgres.withRunning { cluster in
            let database = cluster.connectionString
            try await MockAuthorizationServer.withRunning { mock in
                let arrivals = Locked<[Arrival]>([])
                let resource = Self.watchRoute(on: mock, into: arrivals)
                // The parent is the fourth process: the one that signs out.
                let store = try await PostgresCredentialStore.connect(to: database)
                defer { store.close() }
                let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
                var sessions: [UserSession] = []
                for index in 0..<endings {
                    let user = "ending\(index)"
                    try mock.addUser(user)
                    let account = Account(issuer: mock.issuer, subject: user)
                    sessions.append(
                        try await manager.signIn(account, tokens: try mock.issueTokens(for: user), makeCurrent: false))
                }
                let arguments = Array(
                    repeating: [
                        "vault-follower", resource.absoluteString, mock.tokenEndpoint.absoluteString,
                        MockAuthorizationServer.Configuration().clientID,
                    ], count: followers)
                let (children, ready) = try await VaultChildren.start(executable, arguments, database: database)
                #expect(ready == Array(repeating: endings, count: followers))
                let pids = children.processIdentifiers.map { "\($0)" }

                var learned: [String: UInt64] = [:]
                var delays: [Double] = []
                var missed: [String] = []
                for session in sessions {
                    let subject = session.account.subject
                    children.sendToAll("watch \(subject)")
                    for index in 0..<followers {
                        let line = await children.readLine(index)
                        #expect(line == "watching \(subject)", "follower \(index): \(line ?? "end of output")")
                    }
                    // A follower that never learns is killed after 5 s, so the test fails by name instead of hanging.
                    let watchdog = Task {
                        try await Task.sleep(for: .seconds(5))
                        children.killAll()
                    }
                    let signingOut = CrossProcessSignOutTests.monotonicNanoseconds()
                    await manager.signOut(session, options: .localOnly)
                    for index in 0..<followers {
                        let line = await children.readLine(index)
                        let parts = line?.split(separator: " ") ?? []
                        guard parts.count == 3, parts[0] == "learned", parts[1] == subject,
                            let instant = UInt64(parts[2])
                        else {
                            missed.append("follower \(index), \(subject): \(line ?? "end of output")")
                            continue
                        }
                        learned["\(pids[index]) \(subject)"] = instant
                        delays.append(Double(instant - min(instant, signingOut)) / 1_000_000)
                    }
                    watchdog.cancel()
                    if !missed.isEmpty { break }
                }
                children.sendToAll("quit")
                let outcomes = await children.outcomes()

                let sorted = delays.sorted()
                let (p50, p99) = (Self.percentile(sorted, 0.5), Self.percentile(sorted, 0.99))
                print(
                    "vault endings: processes \(followers + 1), endings \(endings), learned p50 "
                        + "\(String(format: "%.1f", p50)) ms, p99 \(String(format: "%.1f", p99)) ms")
                #expect(missed.isEmpty, "\(missed)")
                #expect(delays.count == endings * followers)
                #expect((sorted.last ?? 0) < 5000, "the slowest learned after \(sorted.last ?? 0) ms")
                for (index, outcome) in outcomes.enumerated() {
                    #expect(outcome.status == 0 && outcome.lines == ["done"], "follower \(index): \(outcome.lines)")
                }
                // A request asked for after its process learned the ending never reached the server.
                let late = arrivals.withLock { list in
                    list.filter { arrival in
                        guard let instant = learned["\(arrival.process) \(arrival.user)"] else { return true }
                        return arrival.askedAt > instant
                    }
                }
                #expect(late.isEmpty, "\(late.count) requests asked for after their process learned")
                #expect(try await store.accounts().isEmpty)
            }
        }
    }

    // MARK: - Faults

    enum KillOutcome {
        /// Nothing presented twice; the survivors' requests all succeeded.
        case clean
        /// The holder died between the server's rotation and its write: the window the file store documents.
        case lostRotation
        /// The children finished before the test saw anyone hold the lock.
        case notHeld
    }

    /// The `application_name` of the session holding a granted advisory lock in `cluster`, if one does.
    static let lockHolderQuery = """
        SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)
        WHERE l.locktype = 'advisory' AND l.granted
        """

    @Test(.timeLimit(.minutes(TimeLimit.scaled(10, by: "SESSIONKIT_VAULT_KILL_ROUNDS", reference: 50))))
    func aKilledLockHolderNeverBlocksTheOthersNorLosesARotationOutsideTheDocumentedWindow() async throws {
        let executable = try Self.crashChild()
        let rounds = Self.killRounds
        let seed = ProcessInfo.processInfo.environment["SESSIONKIT_CRASH_SEED"].flatMap { UInt64($0) } ?? 0x9_0C_CE55
        var generator = SeededGenerator(seed: seed)
        var counts: [KillOutcome: Int] = [:]
        try await LoopbackPostgres.withRunning { cluster in
            for round in 1...rounds {
                let delay = UInt32.random(in: 0...10_000, using: &generator)
                let context = "round \(round) of \(rounds) (seed \(seed), kill \(delay) µs into the hold)"
                let database = try await PostgresCredentialStoreTests.freshDatabase(in: cluster)
                let outcome = try await Self.killRound(executable, database: database, delay: delay, context: context)
                counts[outcome, default: 0] += 1
            }
        }
        let (clean, lost, notHeld) = (counts[.clean] ?? 0, counts[.lostRotation] ?? 0, counts[.notHeld] ?? 0)
        print(
            "vault kill: rounds \(rounds) (seed \(seed)): clean \(clean), killed between the server's rotation and "
                + "the write \(lost), holder not seen \(notHeld)")
        #expect(clean > 0, "no round ended clean")
    }

    private static func killRound(
        _ executable: URL, database: String, delay: UInt32, context: String
    ) async throws -> KillOutcome {
        try await MockAuthorizationServer.withRunning { mock in
            let account = try #require(try await Self.seed(["alice"], at: mock, in: database).first)
            let original = try await Self.storedRecord(of: account, in: database)?.refreshToken
            mock.invalidateAccessTokens(for: "alice")
            let arguments = (0..<Self.processes).map { index in
                [
                    "vault-fleet", mock.tokenEndpoint.absoluteString, MockAuthorizationServer.Configuration().clientID,
                    mock.userInfoEndpoint.absoluteString, "\(Self.requestsPerAccount)", "1", "\(index)",
                ]
            }
            let (fleet, _) = try await VaultChildren.start(
                executable, arguments, database: database, namingConnections: true)
            fleet.sendToAll("go")
            // Polls PostgreSQL for the holder of the account's lock and kills it `delay` µs after first seeing it.
            let holder = await offPool { () -> Int? in
                guard let watcher = try? PostgresConnection(connectionString: database) else { return nil }
                defer { watcher.close() }
                let deadline = ContinuousClock.now.advanced(by: .seconds(20))
                while ContinuousClock.now < deadline, fleet.isRunning {
                    let name = (try? watcher.execute(Self.lockHolderQuery))?.rows.first?.first ?? nil
                    if let name, name.hasPrefix("child"), let index = Int(name.dropFirst("child".count)) {
                        if delay > 0 { usleep(delay) }
                        fleet.kill(index)
                        return index
                    }
                    usleep(100)
                }
                return nil
            }
            let killedAt = ContinuousClock.now
            let outcomes = await fleet.outcomes()
            guard let holder else { return .notHeld }
            // The server released the dead holder's lock with its connection: nobody waited out the bound (30 s).
            let waited = ContinuousClock.now - killedAt
            #expect(waited < .seconds(30), "\(context): the survivors took \(waited) after the kill")
            let survivors = outcomes.enumerated().filter { $0.offset != holder }.map(\.element)
            for survivor in survivors {
                #expect(survivor.status == 0, "\(context): a survivor exited with \(survivor.status)")
                #expect(survivor.done != nil, "\(context): a survivor did not finish: \(survivor.lines)")
            }
            let record = try await Self.storedRecord(of: account, in: database)
            let refreshes = mock.tokenRequestCount(grant: .refreshToken)
            if mock.repeatedRefreshTokenCount == 0 {
                // Nothing presented twice: each refresh presented the newest token there was.
                #expect(refreshes <= 2, "\(context): \(refreshes) refreshes reached the server")
                for survivor in survivors {
                    #expect(survivor.done?.succeeded == Self.requestsPerAccount, "\(context): \(survivor.lines)")
                }
                let stored = try #require(record?.refreshToken, "\(context): the store lost the record")
                #expect(mock.isActive(token: stored), "\(context): the stored refresh token is not usable")
                return .clean
            }
            // The holder's refresh rotated the token at the server and died before writing the new one: the survivor
            // that found the old one presented it once, the server revoked the grant, and the record was deleted.
            #expect(mock.repeatedRefreshTokenCount == 1, "\(context)")
            #expect(refreshes == 2, "\(context): \(refreshes) refreshes reached the server")
            for survivor in survivors {
                let codes = Set(survivor.failures.map { $0.split(separator: " ").dropLast().joined(separator: " ") })
                #expect(
                    codes.isSubset(of: ["failed refreshRejected", "failed sessionEnded", "failed sessionRevoked"]),
                    "\(context): \(codes)")
            }
            #expect(
                record == nil || record?.refreshToken != original,
                "\(context): a rejected grant's record was written back")
            return .lostRotation
        }
    }

    /// The record of `account` as a store of its own reads it now.
    static func storedRecord(of account: Account, in database: String) async throws -> CredentialRecord? {
        let store = try await PostgresCredentialStore.connect(to: database, poolSize: 1)
        defer { store.close() }
        return try await store.load(for: account)
    }

    @Test(.timeLimit(.minutes(TimeLimit.heavy)))
    func aDatabaseStoppedUnderLoadSignsNobodyOutAndEveryRefreshSucceedsOnceItIsBack() async throws {
        let executable = try Self.crashChild()
        let count = 20
        let followers = 3
        try await LoopbackPostgres.withRunning { cluster in
            let database = cluster.connectionString
            try await MockAuthorizationServer.withRunning { mock in
                let arrivals = Locked<[Arrival]>([])
                let resource = Self.watchRoute(on: mock, into: arrivals)
                let users = (0..<count).map { "stop\($0)" }
                let accounts = try await Self.seed(users, at: mock, in: database)
                let arguments = Array(
                    repeating: [
                        "vault-follower", resource.absoluteString, mock.tokenEndpoint.absoluteString,
                        MockAuthorizationServer.Configuration().clientID,
                    ], count: followers)
                let (children, ready) = try await VaultChildren.start(executable, arguments, database: database)
                #expect(ready == Array(repeating: count, count: followers))
                // Given every process looping requests on every account.
                var unexpected: [String] = []
                for user in users { children.sendToAll("watch \(user)") }
                for index in 0..<followers {
                    var watching = 0
                    while watching < count {
                        guard let line = await children.readLine(index) else { break }
                        if line.hasPrefix("watching ") { watching += 1 } else { unexpected.append(line) }
                    }
                }

                // When the database stops, and meanwhile every access token dies at the server: each process meets
                // 401s and cannot take any account's lock, so nothing refreshes while it is away.
                try await LoopbackPostgres.onThread { try cluster.stop() }
                for user in users { mock.invalidateAccessTokens(for: user) }
                try await Task.sleep(for: .seconds(1))
                #expect(mock.tokenRequestCount == 0, "a refresh went out while the database was away")
                try await LoopbackPostgres.onThread { try cluster.restart() }
                let restarted = CrossProcessSignOutTests.monotonicNanoseconds()

                // Then once it is back, every process's requests succeed again for every account, one refresh each,
                // within 10 s: the refreshes the store refused meanwhile did not fill the loop guard (5 in 30 s),
                // which would refuse every account for the rest of its window.
                let deadline = ContinuousClock.now.advanced(by: .seconds(10))
                var served = 0
                while ContinuousClock.now < deadline {
                    served = arrivals.withLock { list in
                        Set(list.filter { $0.arrivedAt > restarted }.map { "\($0.process) \($0.user)" }).count
                    }
                    if served == followers * count { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                let back = Double(CrossProcessSignOutTests.monotonicNanoseconds() - restarted) / 1_000_000_000
                #expect(served == followers * count, "requests served after the restart for \(served) of 60")
                children.sendToAll("quit")
                let outcomes = await children.outcomes()
                for (index, outcome) in outcomes.enumerated() {
                    #expect(outcome.status == 0 && outcome.lines.last == "done", "follower \(index): \(outcome.lines)")
                    unexpected += outcome.lines.dropLast()
                }
                #expect(unexpected.filter { $0.hasPrefix("learned ") }.isEmpty, "signed out: \(unexpected)")
                let refreshes = mock.tokenRequestCount(grant: .refreshToken)
                print(
                    "vault database away: processes \(followers), accounts \(count), every account served again "
                        + "\(String(format: "%.1f", back)) s after the restart, token requests \(refreshes), "
                        + "signed out \(unexpected.filter { $0.hasPrefix("learned ") }.count)")
                #expect(refreshes == count, "one refresh per account")
                #expect(mock.repeatedRefreshTokenCount == 0)
                #expect(mock.reuseDetectionCount == 0)

                // Every record is there, holding the refresh token the server considers live: the next refresh
                // with it succeeds.
                let store = try await PostgresCredentialStore.connect(to: database)
                defer { store.close() }
                #expect(try await store.accounts().count == count, "a record was deleted")
                let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
                for account in accounts {
                    let stored = try #require(try await store.load(for: account)?.refreshToken, "\(account.subject)")
                    #expect(mock.isActive(token: stored), "\(account.subject): the stored refresh token is retired")
                    let session = try #require(try await manager.session(for: account))
                    try await session.refreshTokens()
                    #expect(session.isActive)
                }
                #expect(mock.repeatedRefreshTokenCount == 0)
            }
        }
    }
}
