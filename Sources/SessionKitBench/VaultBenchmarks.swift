import Foundation
import LoopbackPostgres
import SessionKit
import SessionKitPostgres
import SessionKitTesting

/// The PostgreSQL credential store (issue 51) beside the file store, in one run: a throwaway cluster
/// (`LoopbackPostgres`, loopback TCP, `fsync` and `synchronous_commit` off) and a temporary directory, against the
/// mock authorization server in this process.
/// - `vault.refresh.*`: a refresh through a `UserSession` whose store coordinates (PostgreSQL: an advisory lock on
///   the account and a re-read of its row; the file store: its lock file and a re-read) against the same refresh on
///   an `InMemoryCredentialStore` with no coordination; the three take turns in every round, in a rotating order.
/// - `vault.notice.*`: two `SessionManager`s, each on a store of its own over one database (or one directory), as
///   two instances would be: a sign-out on one, and the time until the other's session of the account ends.
/// - `vault.records.*`: loads, then saves, of distinct accounts by concurrent tasks, the two stores taking turns.
enum VaultBenchmarks {
    private static let refreshes = 300
    private static let endings = 200
    /// Rounds run first and not counted: connections opened, code paths warmed.
    private static let warmUp = 10
    private static let tasks = 8
    /// Each store's records are measured in turns of this long, alternating with the other store's.
    private static let turn = Duration.seconds(1)
    private static let turns = 2
    /// The loop guard counts forced refreshes too; these sessions refresh hundreds of times on purpose.
    private static let unguarded = RefreshPolicy(maximumRefreshes: 1_000_000)
    private static let fixture = "the fixture's PostgreSQL runs with fsync and synchronous_commit off"

    static let all = [
        Benchmark(
            resultNames: [
                "vault.refresh.milliseconds", "vault.refresh.plain.milliseconds", "vault.refresh.overhead.milliseconds",
                "vault.refresh.ratio", "vault.file.refresh.milliseconds", "vault.file.refresh.overhead.milliseconds",
                "vault.file.refresh.ratio",
            ],
            run: { try await measureRefreshes() }),
        Benchmark(
            resultNames: [
                "vault.notice.p50_ms", "vault.notice.p99_ms", "vault.file.notice.p50_ms", "vault.file.notice.p99_ms",
            ],
            run: { try await measureNotices() }),
        Benchmark(
            resultNames: [
                "vault.records.reads_per_second", "vault.records.writes_per_second",
                "vault.file.records.reads_per_second", "vault.file.records.writes_per_second",
            ],
            run: { try await measureRecords() }),
    ]

    // MARK: - Refresh

    private static func measureRefreshes() async throws -> [BenchResult] {
        try await withStores { database, directory in
            try await MockAuthorizationServer.withRunning(configuration: .init(server: .init(recordsRequests: false))) {
                mock in
                let postgres = try await PostgresCredentialStore.connect(to: database)
                defer { postgres.close() }
                // In the order of the figures: the plain refresh, PostgreSQL's, the file store's.
                let stores: [any CredentialStore] = [
                    InMemoryCredentialStore(), postgres, try FileCredentialStore(directory: directory),
                ]
                var managers: [SessionManager] = []
                var sessions: [UserSession] = []
                for (index, store) in stores.enumerated() {
                    let user = "refresh\(index)"
                    try mock.addUser(user)
                    let manager = SessionManager(
                        configuration: .init(store: store, tokenEndpoint: mock.makeClient(), refreshPolicy: unguarded))
                    managers.append(manager)
                    sessions.append(
                        try await manager.signIn(
                            Account(issuer: mock.issuer, subject: user), tokens: try mock.issueTokens(for: user)))
                }
                var milliseconds = [[Double]](repeating: [], count: stores.count)
                for round in 0..<(warmUp + refreshes) {
                    for offset in stores.indices {
                        let index = (round + offset) % stores.count
                        let start = ContinuousClock.now
                        try await sessions[index].refreshTokens()
                        let elapsed = ContinuousClock.now - start
                        if round >= warmUp { milliseconds[index].append(Statistics.seconds(elapsed) * 1000) }
                    }
                }
                let reused = mock.repeatedRefreshTokenCount
                guard reused == 0, sessions.allSatisfy(\.isActive) else {
                    throw BenchError("vault.refresh: \(reused) refresh token(s) presented twice, or a session ended")
                }
                withExtendedLifetime(managers) {}
                let (plain, coordinated, file) = (
                    Statistics.median(milliseconds[0]), Statistics.median(milliseconds[1]),
                    Statistics.median(milliseconds[2])
                )
                BenchLog.note(
                    "vault.refresh: median \(BenchLog.rounded(plain, 3)) ms plain, \(BenchLog.rounded(coordinated, 3)) "
                        + "ms PostgreSQL, \(BenchLog.rounded(file, 3)) ms file, over \(refreshes) rounds")
                let each = "median of \(refreshes) refreshTokens() through a UserSession, the stores taking turns"
                return [
                    BenchResult(
                        name: "vault.refresh.milliseconds", value: coordinated,
                        unit:
                            "ms (PostgresCredentialStore: advisory lock, re-read, token request, row written; \(each))"),
                    BenchResult(
                        name: "vault.refresh.plain.milliseconds", value: plain,
                        unit: "ms (InMemoryCredentialStore, no coordination: token request, record kept; \(each))"),
                    BenchResult(
                        name: "vault.refresh.overhead.milliseconds", value: coordinated - plain,
                        unit: "ms (PostgreSQL's median − the plain one; \(fixture))"),
                    BenchResult(
                        name: "vault.refresh.ratio", value: coordinated / plain, unit: "x (PostgreSQL ÷ plain, medians)"
                    ),
                    BenchResult(
                        name: "vault.file.refresh.milliseconds", value: file,
                        unit: "ms (FileCredentialStore: lock file, re-read, token request, record written; \(each))"),
                    BenchResult(
                        name: "vault.file.refresh.overhead.milliseconds", value: file - plain,
                        unit: "ms (the file store's median − the plain one)"),
                    BenchResult(
                        name: "vault.file.refresh.ratio", value: file / plain, unit: "x (file store ÷ plain, medians)"),
                ]
            }
        }
    }

    // MARK: - Endings

    private static func measureNotices() async throws -> [BenchResult] {
        try await withStores { database, directory in
            try await MockAuthorizationServer.withRunning(configuration: .init(server: .init(recordsRequests: false))) {
                mock in
                let postgres = [
                    try await PostgresCredentialStore.connect(to: database),
                    try await PostgresCredentialStore.connect(to: database),
                ]
                defer { for store in postgres { store.close() } }
                let files = [
                    try FileCredentialStore(directory: directory), try FileCredentialStore(directory: directory),
                ]
                // Two instances on each: PostgreSQL's, then the file store's.
                let pairs = [postgres as [any CredentialStore], files as [any CredentialStore]].map { stores in
                    stores.map { SessionManager(configuration: .init(store: $0, tokenEndpoint: mock.makeClient())) }
                }
                try mock.addUser("notice")
                // Each PostgreSQL store's listener connects on a thread of its own after the store starts; a notice
                // sent before it listens is not heard, so the first ending waits for it.
                try await Task.sleep(for: .seconds(1))
                var milliseconds: [[Double]] = [[], []]
                for round in 0..<(warmUp + endings) {
                    for offset in pairs.indices {
                        let index = (round + offset) % pairs.count
                        let account = Account(issuer: mock.issuer, subject: "notice-\(index)-\(round)")
                        let learned = try await ending(
                            of: account, tokens: try mock.issueTokens(for: "notice"), between: pairs[index])
                        if round >= warmUp { milliseconds[index].append(learned) }
                    }
                }
                BenchLog.note(
                    "vault.notice: slowest \(BenchLog.rounded(milliseconds[0].max() ?? .nan, 1)) ms PostgreSQL, "
                        + "\(BenchLog.rounded(milliseconds[1].max() ?? .nan, 1)) ms file, over \(endings) endings")
                let each = "from signOut on one manager to onEnd on the other's session, \(endings) endings"
                return [
                    BenchResult(
                        name: "vault.notice.p50_ms", value: Statistics.median(milliseconds[0]),
                        unit: "ms (two PostgresCredentialStores on one database, LISTEN/NOTIFY; \(each))"),
                    BenchResult(
                        name: "vault.notice.p99_ms", value: percentile(99, of: milliseconds[0]),
                        unit: "ms (the same, 99th percentile; goal ≤ 250)"),
                    BenchResult(
                        name: "vault.file.notice.p50_ms", value: Statistics.median(milliseconds[1]),
                        unit: "ms (two FileCredentialStores on one directory, the notice file; \(each))"),
                    BenchResult(
                        name: "vault.file.notice.p99_ms", value: percentile(99, of: milliseconds[1]),
                        unit: "ms (the same, 99th percentile)"),
                ]
            }
        }
    }

    /// Signs `account` in on the first manager, opens its session on the second, signs it out on the first, and
    /// returns the milliseconds from the sign-out's start to the second session's end.
    private static func ending(of account: Account, tokens: TokenSet, between pair: [SessionManager]) async throws
        -> Double
    {
        let signedIn = try await pair[0].signIn(account, tokens: tokens)
        guard let there = try await pair[1].session(for: account) else {
            throw BenchError("vault.notice: the second manager found no record of \(account.subject)")
        }
        let (ended, continuation) = AsyncStream<ContinuousClock.Instant>.makeStream()
        there.onEnd {
            continuation.yield(ContinuousClock.now)
            continuation.finish()
        }
        let start = ContinuousClock.now
        await pair[0].signOut(signedIn)
        let learned = try await withThrowingTaskGroup(of: ContinuousClock.Instant?.self) { group in
            group.addTask {
                for await instant in ended { return instant }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let learned else {
            throw BenchError("vault.notice: \(account.subject)'s session did not end within 10 s of the sign-out")
        }
        return Statistics.seconds(learned - start) * 1000
    }

    /// The nearest-rank `rank`th percentile of `values`; NaN when there are none.
    static func percentile(_ rank: Int, of values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let position = (rank * sorted.count + 99) / 100
        return sorted[min(max(position, 1), sorted.count) - 1]
    }

    // MARK: - Records

    private static func measureRecords() async throws -> [BenchResult] {
        try await withStores { database, directory in
            let postgres = try await PostgresCredentialStore.connect(to: database)
            defer { postgres.close() }
            let stores: [any CredentialStore] = [postgres, try FileCredentialStore(directory: directory)]
            let accounts = (0..<tasks).map { Account(issuer: "https://issuer.example", subject: "records-\($0)") }
            for store in stores {
                for account in accounts { try await store.save(record(of: account, version: 0)) }
            }
            // Per store: reads, then writes; operations and seconds.
            var operations = [[Int]](repeating: [0, 0], count: stores.count)
            var seconds = [[Double]](repeating: [0, 0], count: stores.count)
            for kind in 0..<2 {
                for round in 0..<turns {
                    for offset in stores.indices {
                        let index = (round + offset) % stores.count
                        let (count, elapsed) = try await hammer(stores[index], accounts, writing: kind == 1)
                        operations[index][kind] += count
                        seconds[index][kind] += elapsed
                    }
                }
            }
            let rates = stores.indices.map { index in
                (0..<2).map { Double(operations[index][$0]) / seconds[index][$0] }
            }
            let length = Int(Statistics.seconds(turn))
            let each = "\(tasks) tasks on distinct accounts, \(turns) turns of \(length) s per store, alternating"
            return [
                BenchResult(
                    name: "vault.records.reads_per_second", value: rates[0][0],
                    unit: "load/s (PostgresCredentialStore, pool of 4; \(each))"),
                BenchResult(
                    name: "vault.records.writes_per_second", value: rates[0][1],
                    unit: "save/s (PostgresCredentialStore, pool of 4; \(each); \(fixture): lower with them on)"),
                BenchResult(
                    name: "vault.file.records.reads_per_second", value: rates[1][0],
                    unit: "load/s (FileCredentialStore; \(each))"),
                BenchResult(
                    name: "vault.file.records.writes_per_second", value: rates[1][1],
                    unit: "save/s (FileCredentialStore, each save written and synced; \(each))"),
            ]
        }
    }

    /// Runs `tasks` tasks for one ``turn``, each loading (or saving) its own account in a loop, and returns how many
    /// operations finished and the seconds from the start to the last task's end.
    private static func hammer(_ store: any CredentialStore, _ accounts: [Account], writing: Bool) async throws -> (
        Int, Double
    ) {
        let start = ContinuousClock.now
        let deadline = start.advanced(by: turn)
        let count = try await withThrowingTaskGroup(of: Int.self) { group in
            for account in accounts {
                group.addTask {
                    var done = 0
                    while ContinuousClock.now < deadline {
                        if writing {
                            try await store.save(record(of: account, version: done + 1))
                        } else if try await store.load(for: account) == nil {
                            throw BenchError("vault.records: \(account.subject)'s record is missing")
                        }
                        done += 1
                    }
                    return done
                }
            }
            return try await group.reduce(0, +)
        }
        return (count, Statistics.seconds(ContinuousClock.now - start))
    }

    /// A record of the size a session stores: a refresh token, an access token and its expiry.
    private static func record(of account: Account, version: Int) -> CredentialRecord {
        CredentialRecord(
            account: account,
            refreshToken: "refresh-\(account.subject)-\(version)-" + String(repeating: "r", count: 32),
            accessToken: "access-\(account.subject)-\(version)-" + String(repeating: "a", count: 200),
            accessTokenExpiresAt: Date().addingTimeInterval(3600), scope: "openid profile")
    }

    // MARK: - Fixture

    /// Runs `body` with the connection string of a throwaway PostgreSQL cluster and a temporary directory for the
    /// file store; both are removed after. The connection string holds the cluster's password: never printed.
    private static func withStores<Result>(_ body: (String, URL) async throws -> Result) async throws -> Result {
        try await LoopbackPostgres.withRunning { cluster in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "sessionkit-bench-vault-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            return try await body(cluster.connectionString, directory)
        }
    }
}
