import Dispatch
import Foundation
import LoopbackPostgres
import SessionKit
import SessionKitPostgres
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The lowest layer of the PostgreSQL credential store against a real server: each test starts a cluster of its own
/// (`LoopbackPostgres`), and every blocking libpq call runs on a thread of its own, never the cooperative pool's.
@Suite(.enabled(if: LoopbackPostgres.shouldRun), .timeLimit(.minutes(1)))
struct PostgresConnectionTests {
    @Test func parametersRoundTripAsText() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let connectionString = postgres.connectionString
            let large = String(repeating: "é", count: 500_000) + "🦊"
            let result = try await blocking {
                let connection = try PostgresConnection(connectionString: connectionString)
                return try connection.execute(
                    "SELECT $1::text, $2::text, $3::text, octet_length($3), $4::int + 1",
                    ["Grüße, 你好 🦊 'quoted' \"double\" \\", nil, large, "41"])
            }
            #expect(result.rows.count == 1)
            #expect(result.rows[0][0] == "Grüße, 你好 🦊 'quoted' \"double\" \\")
            #expect(result.rows[0][1] == nil)
            #expect(result.rows[0][2] == large)
            #expect(result.rows[0][3] == "\(large.utf8.count)")
            #expect(result.rows[0][4] == "42")
        }
    }

    @Test func affectedRowsCountChangedRows() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let connectionString = postgres.connectionString
            let counts = try await blocking {
                let connection = try PostgresConnection(connectionString: connectionString)
                _ = try connection.execute("CREATE TABLE records (id int PRIMARY KEY, body text)")
                let inserted = try connection.execute(
                    "INSERT INTO records VALUES (1, $1), (2, $2), (3, NULL)", ["one", "two"])
                let updated = try connection.execute("UPDATE records SET body = 'x' WHERE id >= $1", ["2"])
                let created = try connection.execute("CREATE INDEX ON records (body)")
                return [inserted.affectedRows, updated.affectedRows, created.affectedRows]
            }
            #expect(counts == [3, 2, 0])
        }
    }

    @Test func wrongPasswordIsAuthenticationAndNeverInTheMessage() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let wrong = "wrong-\(postgres.password.prefix(8))-secret"
            let connectionString = postgres.connectionString.replacing(postgres.password, with: wrong)
            let error = await #expect(throws: PostgresError.self) {
                try await blocking { try PostgresConnection(connectionString: connectionString) }
            }
            #expect(error?.kind == .authentication)
            for text in [error?.message ?? "", error?.description ?? ""] {
                #expect(!text.contains(wrong))
                #expect(!text.contains(postgres.password))
                #expect(!text.contains(connectionString))
            }
            #expect(error?.message.contains("password authentication failed") == true)
        }
    }

    @Test func closedPortIsUnreachableQuickly() async throws {
        // A bound socket that never listens: connecting to it is refused, and no other process can take the port.
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        let port = try #require(Self.bindLoopback(descriptor))
        let start = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) {
            try await blocking {
                try PostgresConnection(
                    connectionString: "host=127.0.0.1 port=\(port) user=x password=hunter2 connect_timeout=2")
            }
        }
        #expect(error?.kind == .unreachable)
        #expect(error?.description.contains("hunter2") == false)
        #expect(ContinuousClock.now - start < .seconds(2))
    }

    @Test(arguments: [
        "host=localhost port", "host=localhost password=hunter2 no_such_option=1", "postgresql://a:b@c:x/",
    ])
    func unparsableStringIsInvalidSettings(connectionString: String) async throws {
        let error = await #expect(throws: PostgresError.self) {
            try await blocking { try PostgresConnection(connectionString: connectionString) }
        }
        #expect(error?.kind == .invalidSettings)
        #expect(error?.description.contains("hunter2") == false)
    }

    @Test func scrubRemovesPasswordSettingsAndURIUserInformation() {
        let scrubbed = PostgresError.scrubbed(
            "password=hunter2 and PASSWORD = 'two words' and postgresql://user:s3cret@host/db?password=x&y=1")
        #expect(!scrubbed.contains("hunter2"))
        #expect(!scrubbed.contains("two words"))
        #expect(!scrubbed.contains("s3cret"))
        #expect(!scrubbed.contains("password=x"))
        #expect(scrubbed.contains("y=1"))
    }

    @Test func refusedStatementsCarryTheirSQLState() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let connectionString = postgres.connectionString
            let kinds = try await blocking {
                let connection = try PostgresConnection(connectionString: connectionString)
                _ = try connection.execute("CREATE TABLE unique_ids (id int PRIMARY KEY)")
                _ = try connection.execute("INSERT INTO unique_ids VALUES (1)")
                var kinds: [PostgresError.Kind?] = []
                for statement in ["SELECT * FROM no_such_table", "SELECT 1 / 0", "INSERT INTO unique_ids VALUES (1)"] {
                    do throws(PostgresError) {
                        _ = try connection.execute(statement)
                        kinds.append(nil)
                    } catch {
                        kinds.append(error.kind)
                    }
                }
                // The connection goes on after a refusal.
                kinds.append(try connection.execute("SELECT 1").rows == [["1"]] ? nil : .unreachable)
                return kinds
            }
            #expect(kinds == [.query(sqlState: "42P01"), .query(sqlState: "22012"), .query(sqlState: "23505"), nil])
        }
    }

    @Test func lockNotGrantedInTimeIsLockTimeout() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let connectionString = postgres.connectionString
            let error = await #expect(throws: PostgresError.self) {
                try await blocking {
                    let holder = try PostgresConnection(connectionString: connectionString)
                    let waiter = try PostgresConnection(connectionString: connectionString)
                    _ = try holder.execute("SELECT pg_advisory_lock(51)")
                    _ = try waiter.execute("SET lock_timeout = '200ms'")
                    _ = try waiter.execute("BEGIN")
                    _ = try holder.execute("CREATE TABLE locked (id int)")
                    _ = try holder.execute("BEGIN")
                    _ = try holder.execute("LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
                    _ = try waiter.execute("SELECT * FROM locked")
                }
            }
            #expect(error?.kind == .lockTimeout)
        }
    }

    @Test func cancelEndsARunningStatementAndTheConnectionGoesOn() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let connectionString = postgres.connectionString
            let connection = try await blocking { try PostgresConnection(connectionString: connectionString) }
            let sleeping = Task {
                try await blocking { try connection.execute("SELECT pg_sleep(10)") }
            }
            try await waitUntilSleeping(postgres)
            let start = ContinuousClock.now
            connection.cancel()
            let error = await #expect(throws: PostgresError.self) { try await sleeping.value }
            #expect(error?.kind == .cancelled)
            #expect(ContinuousClock.now - start < .seconds(1))
            let after = try await blocking { try connection.execute("SELECT 'still here'") }
            #expect(after.rows == [["still here"]])
        }
    }

    @Test func notificationsArriveBetweenTwoConnections() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let connectionString = postgres.connectionString
            let received = try await blocking {
                let listener = try PostgresConnection(connectionString: connectionString)
                let sender = try PostgresConnection(connectionString: connectionString)
                _ = try listener.execute("LISTEN records_changed")
                let before = try listener.notifications()
                let idle = listener.waitForInput(timeout: .milliseconds(50), stopDescriptor: -1)
                _ = try sender.execute("SELECT pg_notify('records_changed', $1)", ["account 7 ✓"])
                var outcomes: [PostgresConnection.WaitOutcome] = []
                var received: [PostgresNotification] = []
                while received.isEmpty, outcomes.count < 10 {
                    outcomes.append(listener.waitForInput(timeout: .seconds(10), stopDescriptor: -1))
                    received += try listener.notifications()
                }
                return (before, idle, outcomes, received)
            }
            #expect(received.0.isEmpty)
            #expect(received.1 == .timedOut)
            #expect(received.2.allSatisfy { $0 == .readable })
            #expect(received.3 == [PostgresNotification(channel: "records_changed", payload: "account 7 ✓")])
        }
    }

    @Test func stopDescriptorEndsAWait() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let connectionString = postgres.connectionString
            let outcome = try await blocking {
                let listener = try PostgresConnection(connectionString: connectionString)
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else { return PostgresConnection.WaitOutcome.timedOut }
                defer { for end in ends { close(end) } }
                var byte: UInt8 = 1
                _ = write(ends[1], &byte, 1)
                return listener.waitForInput(timeout: .seconds(10), stopDescriptor: ends[0])
            }
            #expect(outcome == .stopped)
        }
    }

    @Test func stoppedServerIsUnreachableAndARestartedOneServesAgain() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let connectionString = postgres.connectionString
            let pool = PostgresPool(connectionString: connectionString, size: 1, label: "stopped-server")
            defer { pool.close() }
            let connection = try await blocking { try PostgresConnection(connectionString: connectionString) }
            #expect(try await pool.withConnection { try $0.execute("SELECT 1").rows } == [["1"]])
            try await blocking { try postgres.stop() }
            let kinds = await blocking { () -> [PostgresError.Kind?] in
                let onOpen = Result { () throws(PostgresError) in try connection.execute("SELECT 1") }
                let onNew = Result { () throws(PostgresError) in
                    try PostgresConnection(connectionString: connectionString)
                }
                return [onOpen.failure?.kind, onNew.failure?.kind]
            }
            #expect(kinds == [.unreachable, .unreachable])
            #expect(connection.isBroken)
            let pooled = await #expect(throws: PostgresError.self) {
                try await pool.withConnection { try $0.execute("SELECT 1") }
            }
            #expect(pooled?.kind == .unreachable)
            try await blocking { try postgres.restart() }
            let fresh = try await blocking { try PostgresConnection(connectionString: connectionString) }
            #expect(try await blocking { try fresh.execute("SELECT 2").rows } == [["2"]])
            #expect(try await pool.withConnection { try $0.execute("SELECT 3").rows } == [["3"]])
        }
    }

    /// Waits until a `pg_sleep` statement runs on the server.
    private func waitUntilSleeping(_ postgres: LoopbackPostgres) async throws {
        try await waitUntilActive(postgres, query: "SELECT pg_sleep")
    }

    /// Waits until a statement that starts with `prefix` runs on the server, asking it from a connection of its own.
    private func waitUntilActive(_ postgres: LoopbackPostgres, query prefix: String) async throws {
        let connectionString = postgres.connectionString
        try await blocking {
            let observer = try PostgresConnection(connectionString: connectionString)
            let query = """
                SELECT count(*) FROM pg_stat_activity
                WHERE state = 'active' AND starts_with(query, $1) AND pid <> pg_backend_pid()
                """
            while try observer.execute(query, [prefix]).rows != [["1"]] {
                usleep(10_000)
            }
        }
    }

    /// Binds `descriptor` to a free loopback port without listening, and returns the port.
    private static func bindLoopback(_ descriptor: Int32) -> Int? {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Runs blocking libpq work on a thread of its own, so no test holds a thread of the cooperative pool in a call.
private func blocking<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await LoopbackPostgres.onThread(body)
}

/// Runs blocking work that does not throw on a thread of its own.
private func blocking<Value: Sendable>(_ body: @escaping @Sendable () -> Value) async -> Value {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

extension Result {
    /// The error, when it is one.
    var failure: Failure? {
        guard case .failure(let error) = self else { return nil }
        return error
    }
}

// The pool's guarantees, against the same kind of server.
extension PostgresConnectionTests {
    @Test func poolOfOneServesFiftyConcurrentCallersOneAtATime() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let pool = PostgresPool(connectionString: postgres.connectionString, size: 1, label: "pool-of-one")
            defer { pool.close() }
            // Bodies in progress now, and the most seen at once.
            let running = Lock((now: 0, most: 0))
            let results = try await withThrowingTaskGroup(of: String?.self) { group in
                for number in 0..<50 {
                    group.addTask {
                        try await pool.withConnection { connection in
                            running.withLock { $0 = (now: $0.now + 1, most: max($0.most, $0.now + 1)) }
                            defer { running.withLock { $0.now -= 1 } }
                            return try connection.execute("SELECT $1::int * 2", ["\(number)"]).rows[0][0]
                        }
                    }
                }
                return try await group.reduce(into: Set<String?>()) { $0.insert($1) }
            }
            #expect(results == Set((0..<50).map { "\($0 * 2)" }))
            #expect(running.withLock { $0.most } == 1)
        }
    }

    @Test func cancellingAWaitingCallerThrowsWithoutRunningItsBody() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let pool = PostgresPool(connectionString: postgres.connectionString, size: 1, label: "waiting")
            defer { pool.close() }
            let holding = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let holder = Task {
                try await pool.withConnection { _ in
                    holding.signal()
                    release.wait()
                }
            }
            await blocking { holding.wait() }
            let ranBody = Lock(false)
            let waiter = Task {
                try await pool.withConnection { _ in ranBody.withLock { $0 = true } }
            }
            while pool.waitingCount == 0 { await Task.yield() }
            waiter.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
            #expect(pool.waitingCount == 0)
            release.signal()
            try await holder.value
            #expect(!ranBody.withLock { $0 })
            // The slot went back to the pool, not to the cancelled caller.
            #expect(try await pool.withConnection { try $0.execute("SELECT 'next'").rows } == [["next"]])
        }
    }

    @Test func cancellingDuringAStatementCancelsItQuickly() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let pool = PostgresPool(connectionString: postgres.connectionString, size: 1, label: "cancel-running")
            defer { pool.close() }
            let sleeping = Task {
                try await pool.withConnection { try $0.execute("SELECT pg_sleep(10)") }
            }
            try await waitUntilSleeping(postgres)
            let start = ContinuousClock.now
            sleeping.cancel()
            let error = await #expect(throws: PostgresError.self) { try await sleeping.value }
            #expect(error?.kind == .cancelled)
            #expect(ContinuousClock.now - start < .milliseconds(900))
            // The next caller's statement is not cancelled by the earlier caller's cancel.
            #expect(try await pool.withConnection { try $0.execute("SELECT 'next'").rows } == [["next"]])
        }
    }

    @Test func cancellingAnAdvisoryLockWaitReturnsIt() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let pool = PostgresPool(connectionString: postgres.connectionString, size: 2, label: "advisory")
            defer { pool.close() }
            let holding = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let holder = Task {
                try await pool.withConnection { connection in
                    _ = try connection.execute("SELECT pg_advisory_lock(51)")
                    holding.signal()
                    release.wait()
                    _ = try connection.execute("SELECT pg_advisory_unlock(51)")
                }
            }
            await blocking { holding.wait() }
            let waiter = Task {
                try await pool.withConnection { try $0.execute("SELECT pg_advisory_lock(51)") }
            }
            try await waitUntilActive(postgres, query: "SELECT pg_advisory_lock")
            waiter.cancel()
            let error = await #expect(throws: PostgresError.self) { try await waiter.value }
            #expect(error?.kind == .cancelled)
            release.signal()
            try await holder.value
        }
    }

    @Test func terminatedConnectionFailsItsCallAndIsReplacedForTheNext() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let pool = PostgresPool(connectionString: postgres.connectionString, size: 1, label: "terminated")
            defer { pool.close() }
            let first = try await pool.withConnection { try $0.execute("SELECT pg_backend_pid()").rows }
            // Terminated while its statement runs.
            let sleeping = Task {
                try await pool.withConnection { try $0.execute("SELECT pg_sleep(10)") }
            }
            try await waitUntilSleeping(postgres)
            try await blocking { try postgres.terminateAllConnections() }
            let error = await #expect(throws: PostgresError.self) { try await sleeping.value }
            #expect(error?.kind == .unreachable)
            let second = try await pool.withConnection { try $0.execute("SELECT pg_backend_pid()").rows }
            #expect(second != first)
            // Terminated while idle in the pool: its next call fails, the one after gets a new connection.
            try await blocking { try postgres.terminateAllConnections() }
            let idle = await #expect(throws: PostgresError.self) {
                try await pool.withConnection { try $0.execute("SELECT 1") }
            }
            #expect(idle?.kind == .unreachable)
            let third = try await pool.withConnection { try $0.execute("SELECT pg_backend_pid()").rows }
            #expect(third != second)
        }
    }

    @Test func failedConnectThrowsItsPostgresError() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let wrong = postgres.connectionString.replacing(postgres.password, with: "not-the-password")
            let pool = PostgresPool(connectionString: wrong, size: 1, label: "wrong-password")
            defer { pool.close() }
            for _ in 0..<2 {
                let error = await #expect(throws: PostgresError.self) {
                    try await pool.withConnection { try $0.execute("SELECT 1") }
                }
                #expect(error?.kind == .authentication)
                #expect(error?.description.contains("not-the-password") == false)
            }
        }
    }

    @Test func closedPoolThrowsUnreachable() async throws {
        try await LoopbackPostgres.withRunning { postgres in
            let pool = PostgresPool(connectionString: postgres.connectionString, size: 1, label: "closed")
            let rows = try await pool.withConnection { try $0.execute("SELECT 1").rows }
            #expect(rows == [["1"]])
            pool.close()
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withConnection { try $0.execute("SELECT 1") }
            }
            #expect(error?.kind == .unreachable)
            #expect(error?.message == "pool closed")
        }
    }
}
