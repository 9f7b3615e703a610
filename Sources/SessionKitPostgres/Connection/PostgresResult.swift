/// What a statement returned: its rows in text format, and how many rows it changed.
package struct PostgresResult: Sendable {
    /// The rows, each a value per column in the server's text format; `nil` is SQL NULL.
    package let rows: [[String?]]
    /// The count `INSERT`, `UPDATE`, `DELETE`, `SELECT` and the like report (`PQcmdTuples`); zero for the others.
    package let affectedRows: Int

    /// Makes a result, for the connection and for tests of code that reads results.
    ///
    /// - Parameters:
    ///   - rows: The rows, each a value per column; `nil` is SQL NULL.
    ///   - affectedRows: The count the statement reported.
    package init(rows: [[String?]], affectedRows: Int) {
        self.rows = rows
        self.affectedRows = affectedRows
    }
}

/// A notification a `LISTEN`ing connection received (`NOTIFY channel, 'payload'` or `pg_notify`).
package struct PostgresNotification: Sendable, Equatable {
    /// The channel it was sent on.
    package let channel: String
    /// The text sent with it; empty when there was none.
    package let payload: String

    /// Makes a notification, for the connection and for tests that compare what arrived.
    ///
    /// - Parameters:
    ///   - channel: The channel it was sent on.
    ///   - payload: The text sent with it.
    package init(channel: String, payload: String) {
        self.channel = channel
        self.payload = payload
    }
}
