import Foundation
import SessionKitPostgres
import Synchronization

/// ``SharedTables`` in PostgreSQL, beside the credential records: `bff_pending_sign_ins` and `bff_cookies`, keyed
/// by the SHA-256 of the state or cookie (never the value itself). One connection per instance, one statement at a
/// time: the example's traffic is small, and a connection that broke is opened again on the next call.
final class DatabaseTables: Sendable {
    private let connectionString: String
    private let connection: Mutex<PostgresConnection?>

    /// Connects and creates the tables, under an advisory lock so instances starting together do not race.
    init(connectionString: String) throws {
        self.connectionString = connectionString
        connection = Mutex(nil)
        try run { connection in
            _ = try connection.execute("BEGIN")
            do {
                _ = try connection.execute("SELECT pg_advisory_xact_lock(4242424242)")
                _ = try connection.execute(
                    """
                    CREATE TABLE IF NOT EXISTS bff_pending_sign_ins (
                        state_hash text PRIMARY KEY, request text NOT NULL, created_at timestamptz NOT NULL)
                    """)
                _ = try connection.execute(
                    "CREATE TABLE IF NOT EXISTS bff_cookies (cookie_hash text PRIMARY KEY, account text NOT NULL)")
                _ = try connection.execute("COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Keeps a pending sign-in, dropping the ones nobody came back from in time.
    func savePendingSignIn(_ request: String, state: String) throws {
        try run { connection in
            _ = try connection.execute(
                "DELETE FROM bff_pending_sign_ins WHERE created_at < now() - make_interval(secs => $1::float8)",
                ["\(SharedTables.pendingLifetime)"])
            _ = try connection.execute(
                "INSERT INTO bff_pending_sign_ins (state_hash, request, created_at) VALUES ($1, $2, now())",
                [state, request])
        }
    }

    /// Takes a pending sign-in once: the `DELETE … RETURNING` of one callback is the only one that finds the row.
    func takePendingSignIn(state: String) -> String? {
        try? run { connection in
            try connection.execute(
                """
                DELETE FROM bff_pending_sign_ins WHERE state_hash = $1
                AND created_at >= now() - make_interval(secs => $2::float8) RETURNING request
                """, [state, "\(SharedTables.pendingLifetime)"]
            ).rows.first?.first ?? nil
        }
    }

    /// Records the account a cookie stands for.
    func remember(_ cookie: String, account: String) throws {
        try run { connection in
            _ = try connection.execute(
                """
                INSERT INTO bff_cookies (cookie_hash, account) VALUES ($1, $2)
                ON CONFLICT (cookie_hash) DO UPDATE SET account = EXCLUDED.account
                """, [cookie, account])
        }
    }

    /// The account a cookie stands for; `nil` when none, or when the database cannot be read (the user signs in).
    func account(for cookie: String) -> String? {
        try? run { connection in
            try connection.execute("SELECT account FROM bff_cookies WHERE cookie_hash = $1", [cookie])
                .rows.first?.first ?? nil
        }
    }

    /// Forgets a cookie.
    func forget(_ cookie: String) {
        _ = try? run { connection in
            _ = try connection.execute("DELETE FROM bff_cookies WHERE cookie_hash = $1", [cookie])
        }
    }

    /// Runs `body` with the connection, opening it first when there is none or it broke.
    private func run<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try connection.withLock { held in
            if held == nil || held?.isBroken == true {
                held?.close()
                held = try PostgresConnection(connectionString: connectionString)
            }
            guard let open = held else { throw PostgresError(.unreachable, message: "no connection") }
            return try body(open)
        }
    }
}
