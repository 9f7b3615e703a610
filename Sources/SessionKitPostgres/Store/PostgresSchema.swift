import SessionKit

/// The tables the store keeps, created and migrated in one transaction under an advisory lock, so instances that
/// start together never race: the first creates, the others find it made.
///
/// Version 1:
/// - `sessionkit_schema (version integer)`: one row, the version of the tables below.
/// - `sessionkit_credentials (account_key text primary key, record text, updated_at timestamptz)`: one row per
///   account, `account_key` the account's ``Account/storageKey`` and `record` the JSON every SessionKit store writes.
enum PostgresSchema {
    /// The tables were made by a newer build.
    struct TooNew: Error {
        let found: Int
    }

    /// The advisory lock key migrations hold; records' locks are hashes of accounts, which a collision with this
    /// would only serialize against a migration.
    static let migrationLock: Int64 = 0x5345_5353_494f_4e4b

    /// Creates the tables when they are missing; refuses tables of a newer version.
    ///
    /// - Parameter connection: A connection, outside any transaction.
    /// - Throws: ``TooNew``, or what the connection throws (the transaction is rolled back).
    static func migrate(_ connection: PostgresConnection) throws {
        _ = try connection.execute("BEGIN")
        do {
            _ = try connection.execute("SELECT pg_advisory_xact_lock($1::bigint)", [String(migrationLock)])
            _ = try connection.execute("CREATE TABLE IF NOT EXISTS sessionkit_schema (version integer NOT NULL)")
            let found = try connection.execute("SELECT max(version) FROM sessionkit_schema").rows.first?.first ?? nil
            switch found.flatMap({ Int($0) }) {
            case nil:
                _ = try connection.execute(
                    """
                    CREATE TABLE IF NOT EXISTS sessionkit_credentials (
                        account_key text PRIMARY KEY,
                        record text NOT NULL,
                        updated_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                _ = try connection.execute(
                    "INSERT INTO sessionkit_schema (version) VALUES ($1::integer)",
                    [String(PostgresCredentialStore.schemaVersion)])
            case let version? where version > PostgresCredentialStore.schemaVersion:
                throw TooNew(found: version)
            default:
                break
            }
            _ = try connection.execute("COMMIT")
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }
}
