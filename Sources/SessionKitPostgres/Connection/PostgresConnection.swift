import CSessionKitPostgres
import SessionKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One libpq connection, in UTF-8, whose calls block the calling thread.
///
/// - Important: Not thread-safe: one caller at a time (``PostgresPool`` guarantees it), except ``cancel()``, which
///   any thread may call at any time. It is `@unchecked Sendable` so a pool can hand it from thread to thread; the
///   libpq handle is touched only by the one caller, and the cancellation state only under its lock.
package final class PostgresConnection: @unchecked Sendable {
    /// What ``cancel()`` shares with the thread running a statement.
    struct Cancellation {
        /// Whether a cancel waits to be acted on: by the statement under way, or else by the next one.
        var isPending = false
        /// The pipe whose read end wakes a statement's wait when ``cancel()`` writes to it; `-1` once closed.
        var wakeRead: Int32
        /// The end ``cancel()`` writes to.
        var wakeWrite: Int32
    }

    /// libpq's connection; `nil` once closed.
    var handle: OpaquePointer?
    /// How long a statement waits for the server's answer unless told otherwise: a server that accepted the
    /// connection and then went silent (a stopped machine, a partition that drops packets without a reset) would
    /// otherwise hold the thread, and a pool's slot, for ever.
    package let answerTimeout: Duration
    /// ``answerTimeout`` unless a caller says otherwise.
    package static let defaultAnswerTimeout = Duration.seconds(10)
    /// Whether a cancel's thread is still waiting for the server (``sendCancel()`` sends one at a time).
    let cancelInFlight = CancelInFlight()
    /// The pending cancel and its wake pipe; the lock lets ``cancel()`` run on any thread.
    let cancellation: Lock<Cancellation>

    /// Connects, blocking until the server answers or the connection fails, with `client_encoding` UTF-8.
    ///
    /// The string is parsed first, so a malformed one fails as ``PostgresError/Kind/invalidSettings`` before any
    /// connection is tried. The string's settings are taken as `dbname` expands them, then `client_encoding`
    /// overrides theirs: every text this type reads and writes is UTF-8, whatever the server's default.
    ///
    /// - Parameters:
    ///   - connectionString: A libpq connection string, `key=value …` or a `postgresql://` URI.
    ///   - answerTimeout: The longest a statement waits for the server's answer (``answerTimeout``).
    /// - Throws: ``PostgresError``: `.invalidSettings`, `.authentication`, or `.unreachable`; its message is libpq's,
    ///   never the string itself.
    package init(
        connectionString: String, answerTimeout: Duration = defaultAnswerTimeout
    ) throws(PostgresError) {
        self.answerTimeout = answerTimeout
        let password = try Self.parsedPassword(connectionString)
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else {
            throw PostgresError(.unreachable, message: "cannot create a pipe (errno \(errno))")
        }
        for end in pipeEnds {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        cancellation = Lock(Cancellation(wakeRead: pipeEnds[0], wakeWrite: pipeEnds[1]))
        // Keywords are read in order, the last value kept: `connect_timeout` before `dbname` is a default the string
        // overrides (libpq's own default waits for ever on a host that drops packets), `client_encoding` after it
        // overrides the string.
        let keywords: [UnsafeMutablePointer<CChar>?] = [
            strdup("connect_timeout"), strdup("dbname"), strdup("client_encoding"), nil,
        ]
        let values: [UnsafeMutablePointer<CChar>?] = [
            strdup(Self.connectTimeout(answerTimeout)), strdup(connectionString), strdup("UTF8"), nil,
        ]
        defer { for text in keywords + values { free(text) } }
        // `expand_dbname`: the first `dbname` value is the whole connection string, expanded into its settings.
        let handle = PQconnectdbParams(keywords.map { UnsafePointer($0) }, values.map { UnsafePointer($0) }, 1)
        guard let handle, PQstatus(handle) == CONNECTION_OK else {
            var message = handle.map { String(cString: PQerrorMessage($0)) } ?? "out of memory"
            if let password, !password.isEmpty {
                message = message.replacing(password, with: "***")
            }
            let kind = handle.map { Self.connectionFailureKind($0, message: message) } ?? .unreachable
            PQfinish(handle)
            Self.closeDescriptors(cancellation)
            throw PostgresError(kind, message: message)
        }
        // libpq prints notices (and a terminated backend's last words) to standard error unless told otherwise.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        self.handle = handle
    }

    deinit {
        close()
    }

    /// Seconds a connection attempt waits for a server unless the connection string says otherwise.
    static let defaultConnectTimeout = 5

    /// The `connect_timeout` given before the connection string's: the default, or a shorter answer timeout
    /// rounded up (a silent server is as silent to a connection attempt as to a statement), at least libpq's least
    /// useful value, 2 seconds.
    static func connectTimeout(_ answerTimeout: Duration) -> String {
        let seconds = Int((answerTimeout / .seconds(1)).rounded(.up))
        return String(max(2, min(defaultConnectTimeout, seconds)))
    }

    /// Whether the connection is closed or lost (`PQstatus` is not `CONNECTION_OK`); a pool replaces such a one.
    package var isBroken: Bool {
        guard let handle else { return true }
        return PQstatus(handle) != CONNECTION_OK
    }

    /// The connection's socket (`PQsocket`), for a caller's own `poll`; `-1` once closed or lost.
    package var socket: Int32 {
        handle.map { PQsocket($0) } ?? -1
    }

    /// Reads what the server sent without waiting, and returns the notifications that arrived, oldest first.
    ///
    /// A notification that arrived with a statement's result is already read; call this before waiting with
    /// ``waitForInput(timeout:stopDescriptor:)``, and again each time it returns `.readable`.
    ///
    /// - Returns: The notifications not returned before; empty when none came.
    /// - Throws: ``PostgresError`` `.unreachable` when the connection is closed or lost.
    package func notifications() throws(PostgresError) -> [PostgresNotification] {
        guard let handle, PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(.unreachable, message: "the connection is closed or lost")
        }
        guard PQconsumeInput(handle) == 1 else {
            throw PostgresError(.unreachable, message: String(cString: PQerrorMessage(handle)))
        }
        var found: [PostgresNotification] = []
        while let notification = PQnotifies(handle) {
            found.append(
                PostgresNotification(
                    channel: String(cString: notification.pointee.relname),
                    payload: String(cString: notification.pointee.extra)))
            PQfreemem(notification)
        }
        if found.isEmpty, PQstatus(handle) != CONNECTION_OK {
            throw PostgresError(.unreachable, message: String(cString: PQerrorMessage(handle)))
        }
        return found
    }

    /// Closes the connection (`PQfinish`) and its wake pipe; later calls throw `.unreachable`. Idempotent.
    package func close() {
        guard let handle else { return }
        self.handle = nil
        PQfinish(handle)
        Self.closeDescriptors(cancellation)
    }

    /// Closes the wake pipe under the lock, so a ``cancel()`` on another thread never writes to a reused descriptor.
    private static func closeDescriptors(_ cancellation: Lock<Cancellation>) {
        cancellation.withLock { state in
            for descriptor in [state.wakeRead, state.wakeWrite] where descriptor >= 0 {
                closeDescriptor(descriptor)
            }
            state.wakeRead = -1
            state.wakeWrite = -1
        }
    }

    /// The password the string sets, to scrub it from a failed connection's message; checks that it parses.
    private static func parsedPassword(_ connectionString: String) throws(PostgresError) -> String? {
        var parseError: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &parseError) else {
            let message = parseError.map { String(cString: $0) } ?? "out of memory"
            PQfreemem(parseError)
            throw PostgresError(.invalidSettings, message: message)
        }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "password", let value = option.pointee.val {
                return String(cString: value)
            }
            option += 1
        }
        return nil
    }

    /// What a failed connection's message means.
    ///
    /// libpq keeps no SQLSTATE for a connection refused during the handshake, so the server's message decides;
    /// its wording is the server's in `lc_messages`, which is English unless an administrator changed it. A failure
    /// none of these recognize counts as unreachable, the kind a caller retries later.
    private static func connectionFailureKind(_ handle: OpaquePointer, message: String) -> PostgresError.Kind {
        if PQconnectionNeedsPassword(handle) != 0 { return .authentication }
        let authentication = [
            "password authentication failed", "no pg_hba.conf entry", "authentication failed", "no password supplied",
            "role \"",
        ]
        if authentication.contains(where: { message.contains($0) }) { return .authentication }
        if message.contains("database \""), message.contains("does not exist") { return .query(sqlState: "3D000") }
        if message.contains("invalid "), message.contains(" value") { return .invalidSettings }
        return .unreachable
    }
}

/// Closes a descriptor; a free function, where `close` is the C library's and not the connection's method.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}
