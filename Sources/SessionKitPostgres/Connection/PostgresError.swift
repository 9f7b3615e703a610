/// Why a PostgreSQL call failed.
///
/// `message` and `description` never contain a password: the initializer scrubs every `password=…` setting and
/// every `user:password@` of a URI before the text is stored, so no later code can print one by accident.
package struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What a caller can do about the failure: retry later, fix the settings, or handle one statement's refusal.
    package enum Kind: Sendable, Equatable {
        /// The server cannot be reached or left: refused, unknown host, timeout, shutting down or starting up
        /// (SQLSTATE 57P0x), a connection lost mid-call, or a closed pool. Retrying later may succeed.
        case unreachable
        /// The server refused the credentials (SQLSTATE 28P01, 28000: a wrong password, no `pg_hba.conf` entry).
        case authentication
        /// The connection string cannot be parsed; retrying the same string never succeeds.
        case invalidSettings
        /// The server refused a statement, with its SQLSTATE.
        case query(sqlState: String)
        /// The statement was cancelled (SQLSTATE 57014): by ``PostgresConnection/cancel()``, or by the server's
        /// `statement_timeout`, which reports the same code.
        case cancelled
        /// A lock was not granted within `lock_timeout` (SQLSTATE 55P03).
        case lockTimeout
    }

    /// What a caller can do about the failure.
    package let kind: Kind
    /// libpq's or the server's message, with any password scrubbed.
    package let message: String

    /// Makes an error whose message is scrubbed of passwords.
    ///
    /// - Parameters:
    ///   - kind: What a caller can do about the failure.
    ///   - message: libpq's or the server's message; scrubbed here, before it is stored.
    package init(_ kind: Kind, message: String) {
        self.kind = kind
        self.message = Self.scrubbed(Self.trimmingTrailingWhitespace(message))
    }

    /// The kind and the message, for a log; never a password.
    package var description: String {
        switch kind {
        case .unreachable: "PostgreSQL unreachable: \(message)"
        case .authentication: "PostgreSQL refused the credentials: \(message)"
        case .invalidSettings: "PostgreSQL connection string is invalid: \(message)"
        case .query(let sqlState): "PostgreSQL refused the statement (SQLSTATE \(sqlState)): \(message)"
        case .cancelled: "PostgreSQL statement cancelled: \(message)"
        case .lockTimeout: "PostgreSQL lock not granted in time: \(message)"
        }
    }

    /// The kind a statement's SQLSTATE stands for.
    ///
    /// Class 08 (connection exception) and the 57P0x codes (the server is shutting down, restarting or
    /// terminated this backend) mean the connection is gone, whatever the statement was.
    ///
    /// - Parameter sqlState: The five-character code of the server's error.
    /// - Returns: The kind a caller switches on.
    package static func kind(sqlState: String) -> Kind {
        switch sqlState {
        case "57014": .cancelled
        case "55P03": .lockTimeout
        case "28P01", "28000": .authentication
        case "57P01", "57P02", "57P03", "57P04", "57P05": .unreachable
        case _ where sqlState.hasPrefix("08"): .unreachable
        default: .query(sqlState: sqlState)
        }
    }

    /// `text` with the value of every `password=…` setting and the secret of every `user:secret@` replaced.
    ///
    /// libpq's own messages do not quote the connection string, but a server message can quote a statement, and a
    /// caller can build one from anything: the scrub costs nothing next to a failure, so it runs on every message.
    ///
    /// - Parameter text: A message.
    /// - Returns: The message with no password in it.
    package static func scrubbed(_ text: String) -> String {
        var result = text
        // A keyword setting: `password=secret`, `password = 'quoted secret'`, also inside a URI's query.
        if let setting = try? Regex(#"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]+)"#) {
            result = result.replacing(setting) { match in "\(match.output[1].substring ?? "")***" }
        }
        // A URI's user information: `postgresql://user:secret@host`.
        if let userInfo = try? Regex(#"(://[^:/@\s]*:)[^@\s]*@"#) {
            result = result.replacing(userInfo) { match in "\(match.output[1].substring ?? "")***@" }
        }
        return result
    }

    /// `text` without the newline libpq ends each message with.
    private static func trimmingTrailingWhitespace(_ text: String) -> String {
        var end = text.endIndex
        while end > text.startIndex, text[text.index(before: end)].isWhitespace { end = text.index(before: end) }
        return String(text[..<end])
    }
}
