import Foundation
import SessionKit

/// A credential store in PostgreSQL, for a server that acts for its users and runs as several instances: one
/// refresh per account across every instance, and an ending in one instance reaching all of them.
///
/// Each account's record is one row of `sessionkit_credentials`, keyed by ``Account/storageKey`` and holding the
/// record in the format every SessionKit store writes; a save replaces the row in one statement, so a reader sees the
/// old record or the new one. ``connect(to:poolSize:lockTimeout:)`` creates the table, or migrates it, under an
/// advisory lock, so instances starting together never race on the schema.
///
/// Its ``coordination`` keeps the promises ``CrossProcessLock`` keeps on one machine, across machines:
/// - A refresh holds a transaction-scoped advisory lock on the account (`pg_advisory_xact_lock`), re-reads the row
///   and adopts a rotation another instance stored instead of presenting the retired token. An instance that dies
///   holding it releases it with its connection. An advisory lock rather than a row lock (`SELECT … FOR UPDATE`):
///   it exists before the account's first row and after its deletion, and it blocks no reader or writer of the row,
///   so the holder's own save, on another connection of the pool, never waits for the holder.
/// - A deletion announces itself with `NOTIFY sessionkit_changes`, naming the account by its
///   ``Account/resourceTag``; every instance listens, and reads that account's row at once. A listener whose
///   connection dropped checks every live session when it reconnects, so a notice lost meanwhile is recovered.
///
/// A database that cannot be reached is a locked store, not an empty one: every call throws ``SessionError``
/// `storeUnavailable`, so nobody is signed out, and rotated tokens are kept in memory and written when it returns
/// (see Locked Stores and Other Processes). Each call tries the server again; nothing waits longer than libpq's
/// `connect_timeout` (5 seconds unless the connection string says otherwise).
///
/// The connection string is libpq's (`host=… dbname=… sslmode=verify-full`, or a `postgresql://` URI): TLS,
/// passwords from `PGPASSWORD` or a `.pgpass` file, and every other libpq setting work as they do for `psql`. It is
/// never printed, logged or put in an error.
public final class PostgresCredentialStore: CredentialStore {
    /// The schema version this build reads and writes.
    public static let schemaVersion = 1

    /// How the instances sharing the database coordinate: an advisory lock per account, `LISTEN`/`NOTIFY`.
    public let coordination: (any StoreCoordination)?

    private let records: PostgresPool
    private let table = "sessionkit_credentials"

    private init(records: PostgresPool, coordination: PostgresCoordination) {
        self.records = records
        self.coordination = coordination
    }

    deinit {
        records.close()
    }

    /// Connects, checks that the server answers and that the credentials are accepted, and creates or migrates the
    /// schema.
    ///
    /// - Parameters:
    ///   - connectionString: A libpq connection string or URI.
    ///   - poolSize: How many connections read and write records; as many again hold refresh locks, and one listens
    ///     for endings.
    ///   - lockTimeout: The bound on a wait for an account's lock (``StoreCoordination/timeout``).
    ///   - answerTimeout: The longest a statement waits for the server's answer (beyond a lock wait): a database
    ///     that accepted the connection and then went silent (a stopped machine, a partition without resets) makes
    ///     the call fail with `storeUnavailable` after it, and the connection is replaced.
    /// - Returns: The store.
    /// - Throws: ``PostgresStoreError``: the server cannot be reached, refuses the credentials, the string cannot be
    ///   parsed, or the schema is of a newer version than this build knows.
    public static func connect(
        to connectionString: String, poolSize: Int = 4, lockTimeout: Duration = .seconds(30),
        answerTimeout: Duration = .seconds(10)
    ) async throws(PostgresStoreError) -> PostgresCredentialStore {
        let size = max(1, poolSize)
        let records = PostgresPool(
            connectionString: connectionString, size: size, label: "records", answerTimeout: answerTimeout)
        let locks = PostgresPool(
            connectionString: connectionString, size: size, label: "locks", answerTimeout: answerTimeout)
        do {
            try await records.withConnection { connection in try PostgresSchema.migrate(connection) }
        } catch {
            records.close()
            locks.close()
            throw PostgresStoreError(starting: error)
        }
        let coordination = PostgresCoordination(
            connectionString: connectionString, records: records, locks: locks, timeout: lockTimeout,
            answerTimeout: answerTimeout)
        return PostgresCredentialStore(records: records, coordination: coordination)
    }

    /// Replaces the row of `record.account` in one statement.
    public func save(_ record: CredentialRecord) async throws {
        let json = String(decoding: try CredentialRecordCoding.encode(record), as: UTF8.self)
        let key = record.account.storageKey
        try await run("store the credential record") { connection in
            _ = try connection.execute(
                """
                INSERT INTO sessionkit_credentials (account_key, record, updated_at) VALUES ($1, $2, now())
                ON CONFLICT (account_key) DO UPDATE SET record = EXCLUDED.record, updated_at = EXCLUDED.updated_at
                """, [key, json])
        }
    }

    /// The row of `account`, decoded and checked, or `nil`.
    public func load(for account: Account) async throws -> CredentialRecord? {
        let key = account.storageKey
        let text = try await run("read the credential record") { connection in
            try connection.execute("SELECT record FROM sessionkit_credentials WHERE account_key = $1", [key])
                .rows.first?.first ?? nil
        }
        guard let text else { return nil }
        return try CredentialRecordCoding.decode(Data(text.utf8), for: account, source: "the row of \(table)")
    }

    /// Deletes the row of `account`; a missing row is not an error.
    public func delete(for account: Account) async throws {
        let key = account.storageKey
        try await run("delete the credential record") { connection in
            _ = try connection.execute("DELETE FROM sessionkit_credentials WHERE account_key = $1", [key])
        }
    }

    /// Deletes every row.
    public func deleteAll() async throws {
        try await run("delete every credential record") { connection in
            _ = try connection.execute("DELETE FROM sessionkit_credentials")
        }
    }

    /// The accounts with a row, as their records name them (display names included); a key SessionKit did not write,
    /// or a row that cannot be decoded, is skipped here and reported by ``load(for:)``.
    public func accounts() async throws -> [Account] {
        let rows = try await run("list the accounts") { connection in
            try connection.execute("SELECT account_key, record FROM sessionkit_credentials").rows
        }
        return rows.compactMap { row -> Account? in
            guard row.count == 2, let key = row[0], let text = row[1], let account = Account(storageKey: key) else {
                return nil
            }
            let record = try? CredentialRecordCoding.decode(Data(text.utf8), for: account, source: "a row")
            return record?.account ?? account
        }
    }

    /// Closes every connection; calls made after it fail with `storeUnavailable`.
    public func close() {
        records.close()
        (coordination as? PostgresCoordination)?.close()
    }

    /// Runs one statement on a pooled connection, reporting a failure as the ``SessionError`` a store throws.
    private func run<T: Sendable>(
        _ what: String, _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws -> T {
        do {
            return try await records.withConnection(body)
        } catch let error as PostgresError where error.kind == .unreachable {
            // A pooled connection the server closed while it sat idle (a restart, a failover, an idle timeout) fails
            // its next call before the pool replaces it: one more try, on a new connection, tells that from a
            // database that is away.
            do {
                return try await records.withConnection(body)
            } catch {
                throw SessionError(postgres: error, while: what)
            }
        } catch {
            throw SessionError(postgres: error, while: what)
        }
    }
}

extension SessionError {
    /// The error a store operation throws for a PostgreSQL failure: `storeUnavailable` when the server cannot be
    /// reached now (the locked-store rules: nobody is signed out), `storageFailure` otherwise.
    ///
    /// - Parameters:
    ///   - error: What the pool threw.
    ///   - what: What was being done, for the message.
    init(postgres error: any Error, while what: String) {
        if error is CancellationError {
            self.init(.storeUnavailable, "cannot \(what): cancelled")
            return
        }
        guard let failure = error as? PostgresError else {
            self.init(.storageFailure, "cannot \(what): \(type(of: error))")
            return
        }
        switch failure.kind {
        case .unreachable:
            self.init(.storeUnavailable, "cannot \(what): the database cannot be reached now (\(failure.message))")
        default:
            self.init(.storageFailure, "cannot \(what): \(failure.description)")
        }
    }
}

/// Why a ``PostgresCredentialStore`` could not start.
public struct PostgresStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Equatable {
        /// No server answered at the address (refused, unknown host, timed out, starting or shutting down).
        case unreachable
        /// The server refused the user or password.
        case authenticationFailed
        /// The TLS connection the string asks for could not be made: the server's certificate is not trusted or does
        /// not name the host, or the server offers no TLS.
        case tlsRefused
        /// The connection string cannot be parsed.
        case invalidConnectionString
        /// The table was made by a newer SessionKit, whose format this build cannot read.
        case schemaTooNew
        /// The server refused a statement (permissions, a table of another shape).
        case serverRefused
    }

    /// What went wrong.
    public let code: Code
    /// libpq's or the server's words, without the connection string or any password.
    public let message: String

    /// An error.
    ///
    /// - Parameters:
    ///   - code: What went wrong.
    ///   - message: The detail.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Whether libpq's words say the TLS handshake or its verification failed (libpq gives a failed connection no
    /// code of its own; its messages are read in the C locale).
    static func isTLSFailure(_ message: String) -> Bool {
        ["certificate verify failed", "SSL error", "server does not support SSL", "does not match host name"]
            .contains { message.contains($0) }
    }

    /// The code and the message, for a log.
    public var description: String { "PostgresStoreError.\(code.rawValue): \(message)" }

    /// The start error for what connecting or migrating threw.
    init(starting error: any Error) {
        if let tooNew = error as? PostgresSchema.TooNew {
            self.init(
                .schemaTooNew,
                "the tables are of schema version \(tooNew.found); this build knows \(PostgresCredentialStore.schemaVersion)"
            )
            return
        }
        guard let failure = error as? PostgresError else {
            self.init(.serverRefused, "\(error)")
            return
        }
        switch failure.kind {
        case .unreachable where Self.isTLSFailure(failure.message): self.init(.tlsRefused, failure.message)
        case .unreachable: self.init(.unreachable, failure.message)
        case .authentication: self.init(.authenticationFailed, failure.message)
        case .invalidSettings: self.init(.invalidConnectionString, failure.message)
        default: self.init(.serverRefused, failure.description)
        }
    }
}
