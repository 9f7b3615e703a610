import Foundation
import LoopbackPort
import LoopbackPostgres
import SessionKit
import SessionKitPostgres
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `PostgresCredentialStore` against a real PostgreSQL that the suite starts (issue 51): the store contract, typed
/// start errors, the advisory lock per account, `LISTEN`/`NOTIFY` endings, and a database that goes away.
@Suite(.enabled(if: LoopbackPostgres.shouldRun), .timeLimit(.minutes(TimeLimit.heavy)))
struct PostgresCredentialStoreTests {
    /// One cluster for the tests that need only a database of their own; tests that stop or restart the server
    /// start their own.
    static let shared = Result { try LoopbackPostgres.start() }

    /// A new, empty database in `cluster`, and a connection string naming it.
    static func freshDatabase(in cluster: LoopbackPostgres) async throws -> String {
        let name = "t_\(UInt64.random(in: 1...UInt64.max))"
        let admin = cluster.connectionString
        try await LoopbackPostgres.onThread {
            let connection = try PostgresConnection(connectionString: admin)
            defer { connection.close() }
            _ = try connection.execute("CREATE DATABASE \(name)")
        }
        return admin.replacingOccurrences(of: "dbname=postgres", with: "dbname=\(name)")
    }

    static func sharedDatabase() async throws -> String {
        try await freshDatabase(in: try shared.get())
    }

    static func record(_ account: Account, _ version: Int) -> CredentialRecord {
        CredentialStoreContract.fullRecord(for: account, version: version)
    }

    // MARK: - The contract every store keeps

    @Test(arguments: CredentialStoreContract.Check.allCases)
    func keepsTheStoreContract(_ check: CredentialStoreContract.Check) async throws {
        try await check.run {
            try await PostgresCredentialStore.connect(to: try await Self.sharedDatabase())
        }
    }

    @Test func aRecordWrittenByOneInstanceIsReadByAnother() async throws {
        let database = try await Self.sharedDatabase()
        let first = try await PostgresCredentialStore.connect(to: database)
        let second = try await PostgresCredentialStore.connect(to: database)
        let alice = CredentialStoreContract.account(1)
        try await first.save(Self.record(alice, 1))
        #expect(try await second.load(for: alice) == Self.record(alice, 1))
        try await second.delete(for: alice)
        #expect(try await first.load(for: alice) == nil)
    }

    // MARK: - Starting

    @Test func aWrongPasswordIsATypedErrorThatNeverSpellsThePassword() async throws {
        let cluster = try Self.shared.get()
        let wrong = "not-\(cluster.password)"
        let string = cluster.connectionString.replacingOccurrences(
            of: "password=\(cluster.password)", with: "password=\(wrong)")
        let error = await #expect(throws: PostgresStoreError.self) {
            _ = try await PostgresCredentialStore.connect(to: string)
        }
        #expect(error?.code == .authenticationFailed)
        #expect(error.map { !"\($0)".contains(wrong) && !"\($0)".contains(cluster.password) } == true)
    }

    @Test func aPasswordFromAPasswordFileIsUsedAndAMissingOneIsATypedError() async throws {
        let cluster = try Self.shared.get()
        let database = try await Self.sharedDatabase()
        let withoutPassword = database.replacingOccurrences(of: "password=\(cluster.password) ", with: "")
        #expect(!withoutPassword.contains(cluster.password))
        try await TemporaryDirectory.with { directory in
            // libpq's own .pgpass format; it refuses a file others can read.
            let file = directory.appendingPathComponent("pgpass")
            try Data("127.0.0.1:\(cluster.port):*:\(LoopbackPostgres.user):\(cluster.password)\n".utf8).write(to: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
            let store = try await PostgresCredentialStore.connect(to: withoutPassword + " passfile=\(file.path)")
            #expect(try await store.accounts().isEmpty)
            let missing = directory.appendingPathComponent("none")
            let error = await #expect(throws: PostgresStoreError.self) {
                _ = try await PostgresCredentialStore.connect(to: withoutPassword + " passfile=\(missing.path)")
            }
            #expect(error?.code == .authenticationFailed)
        }
    }

    @Test func aServerVerifiedOverTLSIsUsedAndOneSignedByAnotherAuthorityIsRefused() async throws {
        let cluster = try Self.shared.get()
        let database = try await Self.sharedDatabase()
        let verified = database + " sslmode=verify-full sslrootcert=\(cluster.certificateAuthority)"
        let store = try await PostgresCredentialStore.connect(to: verified)
        let alice = CredentialStoreContract.account(1)
        try await store.save(Self.record(alice, 1))
        #expect(try await store.load(for: alice) == Self.record(alice, 1))
        // Another cluster's authority did not sign this server's certificate.
        let other = try LoopbackPostgres.start()
        defer { other.shutdown() }
        let error = await #expect(throws: PostgresStoreError.self) {
            _ = try await PostgresCredentialStore.connect(
                to: database + " sslmode=verify-full sslrootcert=\(other.certificateAuthority)")
        }
        #expect(error?.code == .tlsRefused)
    }

    @Test func anUnreachableHostIsATypedErrorAtOnce() async throws {
        // A loopback port nobody listens on: refused at once.
        let string = "host=127.0.0.1 port=\(try Self.closedPort()) user=nobody dbname=none connect_timeout=2"
        let started = ContinuousClock.now
        let error = await #expect(throws: PostgresStoreError.self) {
            _ = try await PostgresCredentialStore.connect(to: string)
        }
        #expect(error?.code == .unreachable)
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test(arguments: ["host=127.0.0.1 port=notaport =", "postgresql://[::1", "nonsense_key=1"])
    func anUnparsableConnectionStringIsATypedError(_ string: String) async throws {
        let error = await #expect(throws: PostgresStoreError.self) {
            _ = try await PostgresCredentialStore.connect(to: string)
        }
        #expect(error?.code == .invalidConnectionString || error?.code == .unreachable)
    }

    @Test func tablesOfANewerSchemaAreRefusedNotOverwritten() async throws {
        let database = try await Self.sharedDatabase()
        let store = try await PostgresCredentialStore.connect(to: database)
        let alice = CredentialStoreContract.account(1)
        try await store.save(Self.record(alice, 1))
        try await LoopbackPostgres.onThread {
            let connection = try PostgresConnection(connectionString: database)
            defer { connection.close() }
            _ = try connection.execute("UPDATE sessionkit_schema SET version = 99")
        }
        let error = await #expect(throws: PostgresStoreError.self) {
            _ = try await PostgresCredentialStore.connect(to: database)
        }
        #expect(error?.code == .schemaTooNew)
        #expect(try await store.load(for: alice) == Self.record(alice, 1), "the newer tables are left as they are")
    }

    @Test func instancesStartingTogetherMakeTheSchemaOnce() async throws {
        let database = try await Self.sharedDatabase()
        let started = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask { (try? await PostgresCredentialStore.connect(to: database, poolSize: 1)) != nil }
            }
            var all: [Bool] = []
            for await ok in group { all.append(ok) }
            return all
        }
        #expect(started == Array(repeating: true, count: 8))
    }

    // MARK: - The lock per account

    @Test func theLockIsPerAccountAndAWaitIsBoundedByTheTimeout() async throws {
        let database = try await Self.sharedDatabase()
        let first = try await PostgresCredentialStore.connect(to: database)
        let second = try await PostgresCredentialStore.connect(to: database, lockTimeout: .seconds(2))
        let (alice, bob) = (CredentialStoreContract.account(1), CredentialStoreContract.account(2))
        let held = try await #require(first.coordination).lock(for: alice)
        let coordination = try #require(second.coordination)
        let bobs = try await coordination.lock(for: bob)
        bobs.release()
        let started = ContinuousClock.now
        let error = await #expect(throws: SessionError.self) {
            _ = try await Bounded.run("a bounded lock wait", within: .seconds(10)) {
                try await coordination.lock(for: alice)
            }
        }
        #expect(error?.code == .refreshTimedOut)
        #expect(ContinuousClock.now - started >= .milliseconds(1900))
        held.release()
        let again = try await Bounded.run("the released lock", within: .seconds(10)) {
            try await coordination.lock(for: alice)
        }
        again.release()
    }

    @Test func aHolderWhoseConnectionDiesReleasesTheLock() async throws {
        let cluster = try LoopbackPostgres.start()
        defer { cluster.shutdown() }
        let database = try await Self.freshDatabase(in: cluster)
        let first = try await PostgresCredentialStore.connect(to: database)
        let second = try await PostgresCredentialStore.connect(to: database, lockTimeout: .seconds(20))
        let alice = CredentialStoreContract.account(1)
        let held = try await #require(first.coordination).lock(for: alice)
        defer { held.release() }
        let waiter = Task { try await #require(second.coordination).lock(for: alice) }
        try await Task.sleep(for: .milliseconds(100))
        // Every connection ends, the holder's with it; the server drops its lock, and the waiter's wait (cut too) is
        // taken up on a new connection.
        try await LoopbackPostgres.onThread { try cluster.terminateAllConnections() }
        let outcome: Result<HeldStoreLock, any Error>
        do {
            outcome = .success(
                try await Bounded.run("the dead holder's lock", within: .seconds(10)) { try await waiter.value })
        } catch {
            outcome = .failure(error)
        }
        switch outcome {
        case .success(let lock): lock.release()
        case .failure(let error):
            // The waiter's own connection was cut mid-wait: a typed, retryable error, never a hang.
            #expect((error as? SessionError)?.code == .storeUnavailable)
            let lock = try await #require(second.coordination).lock(for: alice)
            lock.release()
        }
    }

    @Test func aCancelledWaitLeavesNothingHeld() async throws {
        let database = try await Self.sharedDatabase()
        let first = try await PostgresCredentialStore.connect(to: database)
        let second = try await PostgresCredentialStore.connect(to: database)
        let alice = CredentialStoreContract.account(1)
        let held = try await #require(first.coordination).lock(for: alice)
        let waiter = Task { try await #require(second.coordination).lock(for: alice) }
        try await Task.sleep(for: .milliseconds(100))
        let cancelled = ContinuousClock.now
        waiter.cancel()
        let outcome = await waiter.result
        #expect(ContinuousClock.now - cancelled < .seconds(2))
        if case .success(let lock) = outcome { lock.release() }
        #expect(throws: CancellationError.self) { try outcome.get() }
        held.release()
        let coordination = try #require(first.coordination)
        let third = try await Bounded.run("the lock after a cancelled wait", within: .seconds(10)) {
            try await coordination.lock(for: alice)
        }
        third.release()
    }

    // MARK: - Endings

    @Test func anAnnouncementReachesEveryInstanceNamingTheAccount() async throws {
        let database = try await Self.sharedDatabase()
        let first = try await PostgresCredentialStore.connect(to: database)
        let second = try await PostgresCredentialStore.connect(to: database)
        let seen = Lock<[StoreChange]>([])
        let arrived = AsyncStream<Void>.makeStream()
        // The check of every account a listener asks for when it starts listening is not the notice looked for.
        let watch = try #require(
            second.coordination?.watchChanges { change in
                guard change.scope != .everyAccount else { return }
                seen.withLock { $0.append(change) }
                arrived.continuation.yield()
            })
        defer { watch.stop() }
        let alice = CredentialStoreContract.account(1)
        // The listener may not be listening yet: announce until it hears one.
        let announcer = Task {
            while !Task.isCancelled {
                await first.coordination?.announceChange(of: alice)
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        let heard: Void? = await Bounded.first(of: arrived.stream, within: .seconds(10))
        announcer.cancel()
        #expect(heard != nil, "no notice arrived")
        let change = try #require(seen.withLock { $0.first })
        #expect(change.scope == .accounts([alice.resourceTag]))
        #expect(change.scope.includes(alice))
        #expect(!change.scope.includes(CredentialStoreContract.account(2)))
    }

    @Test func aListenerChecksEveryAccountWhenItStartsListeningAndAgainAfterALostConnection() async throws {
        let cluster = try LoopbackPostgres.start()
        defer { cluster.shutdown() }
        let database = try await Self.freshDatabase(in: cluster)
        let store = try await PostgresCredentialStore.connect(to: database)
        let arrived = AsyncStream<StoreChange>.makeStream()
        let watch = try #require(store.coordination?.watchChanges { arrived.continuation.yield($0) })
        defer { watch.stop() }
        // Listening: notices sent before it were heard by no one, so every account is read.
        let first = await Bounded.first(of: arrived.stream, within: .seconds(30))
        #expect(first?.scope == .everyAccount, "a listener that starts reads every account once")
        try await LoopbackPostgres.onThread { try cluster.terminateAllConnections() }
        let change = await Bounded.first(of: arrived.stream, within: .seconds(30))
        #expect(change?.scope == .everyAccount, "notices sent while it was away are recovered by reading every one")
    }

    // MARK: - A database that goes away

    @Test func aDatabaseThatGoesAwayIsALockedStoreAndComesBack() async throws {
        let cluster = try LoopbackPostgres.start()
        defer { cluster.shutdown() }
        let database = try await Self.freshDatabase(in: cluster)
        let store = try await PostgresCredentialStore.connect(to: database)
        let alice = CredentialStoreContract.account(1)
        try await store.save(Self.record(alice, 1))
        try await LoopbackPostgres.onThread { try cluster.stop() }
        for operation in ["load", "save", "accounts", "delete", "lock"] {
            let error = await #expect(throws: SessionError.self, "\(operation)") {
                switch operation {
                case "load": _ = try await store.load(for: alice)
                case "save": try await store.save(Self.record(alice, 2))
                case "accounts": _ = try await store.accounts()
                case "delete": try await store.delete(for: alice)
                default: _ = try await store.coordination?.lock(for: alice)
                }
            }
            #expect(error?.code == .storeUnavailable, "\(operation): unavailable, so nobody is signed out")
        }
        try await LoopbackPostgres.onThread { try cluster.restart() }
        #expect(try await store.load(for: alice) == Self.record(alice, 1), "nothing was lost or deleted")
        try await store.save(Self.record(alice, 3))
        #expect(try await store.load(for: alice) == Self.record(alice, 3))
    }

    /// A database that accepts connections and then goes silent (frozen: a stopped machine, a partition that drops
    /// packets) is a locked store within the answer timeout, not a hang: every call throws `storeUnavailable`, the
    /// silent connections are dropped, and once the server answers again the store serves with new ones.
    @Test func aDatabaseThatGoesSilentIsUnavailableWithinTheAnswerTimeoutAndServedAgain() async throws {
        let cluster = try LoopbackPostgres.start()
        defer { cluster.shutdown() }
        // The fixture's string says `connect_timeout=5`; a silent server costs a connection attempt that twice (with
        // TLS, then without), so the test asks for libpq's least.
        let database = try await Self.freshDatabase(in: cluster) + " connect_timeout=2"
        let answerTimeout = Duration.seconds(1)
        let store = try await PostgresCredentialStore.connect(
            to: database, poolSize: 2, lockTimeout: .seconds(1), answerTimeout: answerTimeout)
        defer { store.close() }
        let alice = CredentialStoreContract.account(1)
        try await store.save(Self.record(alice, 1))
        // Both pools' connections open, so the calls below meet a silent server on a live connection.
        try await store.coordination?.lock(for: alice).release()
        try cluster.freeze()
        for operation in ["load", "save", "lock"] {
            let started = ContinuousClock.now
            // Raced against a bound, not awaited: a call that hangs on the silent server must fail here in seconds,
            // and is left to finish once the server thaws.
            let outcome = await Self.outcome(within: .seconds(20)) {
                switch operation {
                case "load": _ = try await store.load(for: alice)
                case "save": try await store.save(Self.record(alice, 2))
                default: _ = try await store.coordination?.lock(for: alice)
                }
            }
            let took = ContinuousClock.now - started
            guard case .failure(let failure)? = outcome else {
                Issue.record("\(operation) on a silent server: \(outcome.map { "\($0)" } ?? "no answer within 20 s")")
                continue
            }
            #expect(
                (failure as? SessionError)?.code == .storeUnavailable,
                "\(operation): unavailable, so nobody is signed out (\(failure))")
            // The lock's bound is its timeout and the answer timeout; the others', the answer timeout. A call that
            // finds no open connection (the silent one was dropped) waits for a new one up to twice the connect
            // timeout.
            #expect(took < .seconds(8), "\(operation) took \(took)")
        }
        try cluster.thaw()
        // Tried again as a server's next requests would be; the first calls may meet connections the thaw closes.
        var served: CredentialRecord?
        let deadline = ContinuousClock.now.advanced(by: .seconds(30))
        while served == nil, ContinuousClock.now < deadline {
            served = try? await store.load(for: alice)
            if served == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        // The save sent to the frozen server may have run once it thawed: its outcome was unknown, as with any lost
        // connection.
        #expect(served == Self.record(alice, 1) || served == Self.record(alice, 2), "served again, nothing lost")
    }

    @Test func aConnectionClosedWhileIdleIsReplacedWithoutAnError() async throws {
        let cluster = try LoopbackPostgres.start()
        defer { cluster.shutdown() }
        let database = try await Self.freshDatabase(in: cluster)
        let store = try await PostgresCredentialStore.connect(to: database, poolSize: 1)
        let alice = CredentialStoreContract.account(1)
        try await store.save(Self.record(alice, 1))
        // A restart, a failover or an idle timeout closes the pooled connection while nothing uses it.
        try await LoopbackPostgres.onThread { try cluster.terminateAllConnections() }
        #expect(try await store.load(for: alice) == Self.record(alice, 1), "the next call opens a new connection")
    }

    // MARK: - Helpers

    /// What `body` came to, or `nil` when it had not returned within `limit` (it is left running).
    static func outcome(
        within limit: Duration, _ body: @escaping @Sendable () async throws -> Void
    ) async -> Result<Void, any Error>? {
        let answered = Lock(false)
        return await withCheckedContinuation { continuation in
            func answer(_ outcome: Result<Void, any Error>?) {
                guard
                    answered.withLock({ done in
                        defer { done = true }
                        return !done
                    })
                else { return }
                continuation.resume(returning: outcome)
            }
            Task {
                do {
                    try await body()
                    answer(.success(()))
                } catch {
                    answer(.failure(error))
                }
            }
            Task {
                try? await Task.sleep(for: limit)
                answer(nil)
            }
        }
    }

    /// A loopback port with no listener: bound, then closed.
    static func closedPort() throws -> Int {
        try LoopbackPort.free()
    }
}
