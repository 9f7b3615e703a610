import CSessionKitPostgres
import Foundation
import SessionKit
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension PostgresConnection {
    /// How long a sent cancel may go unanswered before it is sent again.
    ///
    /// The server ignores a cancel that reaches the backend before the statement does (it is then still reading
    /// the command), so one cancel alone could leave a long statement running.
    static let cancelResendInterval = Duration.milliseconds(250)

    /// Runs one statement with text parameters (`$1`, `$2`, …) and returns its rows in text format.
    ///
    /// The statement is sent with `PQsendQueryParams` and the thread then sleeps in `poll` on the socket and the
    /// wake pipe, so ``cancel()`` from another thread interrupts the wait and sends the server a cancel.
    ///
    /// - Parameters:
    ///   - sql: One SQL statement.
    ///   - parameters: The values of `$1`, `$2`, …, as text; `nil` is SQL NULL.
    ///   - answerTimeout: The longest the statement waits for the server (`nil`: the connection's
    ///     ``answerTimeout``); then the connection is dropped (its socket shut down, so it counts as broken and a
    ///     pool replaces it) and the call throws `.unreachable`. Whether the server ran the statement is then
    ///     unknown, as with any lost connection.
    /// - Returns: The rows and the affected-row count.
    /// - Throws: ``PostgresError``: `.query(sqlState:)`, `.cancelled`, `.lockTimeout`, or `.unreachable` when the
    ///   connection is closed or lost during the call, or the server did not answer within `answerTimeout`.
    package func execute(
        _ sql: String, _ parameters: [String?] = [], answerTimeout: Duration? = nil
    ) throws(PostgresError) -> PostgresResult {
        let answerTimeout = answerTimeout ?? self.answerTimeout
        guard let handle, PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(.unreachable, message: "the connection is closed or lost")
        }
        if takePendingCancel() {
            throw PostgresError(.cancelled, message: "cancelled before the statement was sent")
        }
        let values = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { for value in values { free(value) } }
        let sent = PQsendQueryParams(
            handle, sql, Int32(values.count), nil, values.map { UnsafePointer($0) }, nil, nil, 0)
        guard sent == 1 else {
            throw PostgresError(
                PQstatus(handle) == CONNECTION_OK ? .query(sqlState: "XX000") : .unreachable,
                message: String(cString: PQerrorMessage(handle)))
        }
        var last: OpaquePointer?
        defer { PQclear(last) }
        let deadline = ContinuousClock.now.advanced(by: answerTimeout)
        while true {
            guard waitUntilResultIsReady(handle, deadline: deadline) else {
                throw PostgresError(.unreachable, message: "the server did not answer within \(answerTimeout)")
            }
            guard let result = PQgetResult(handle) else { break }
            PQclear(last)
            last = result
        }
        return try Self.interpret(last, of: handle)
    }

    /// Cancels the statement under way on another thread, or, when none is, the next one this connection starts.
    ///
    /// Safe on any thread at any time, also after ``close()``; it never blocks. The statement then throws
    /// ``PostgresError/Kind/cancelled`` (unless it finished first).
    package func cancel() {
        cancellation.withLock { state in
            guard !state.isPending, state.wakeWrite >= 0 else { return }
            state.isPending = true
            var byte: UInt8 = 1
            _ = write(state.wakeWrite, &byte, 1)
        }
    }

    /// Forgets a cancel no statement acted on: a pool calls it when it hands the connection to its next caller,
    /// whom an earlier caller's cancel must not reach.
    package func clearCancellation() {
        _ = takePendingCancel()
    }

    /// Whether a cancel was pending; clears it and empties the wake pipe.
    func takePendingCancel() -> Bool {
        cancellation.withLock { state in
            defer { state.isPending = false }
            var buffer = [UInt8](repeating: 0, count: 16)
            while state.wakeRead >= 0, read(state.wakeRead, &buffer, buffer.count) > 0 {}
            return state.isPending
        }
    }

    /// Sleeps until `PQgetResult` would not block: reading the socket as data comes, and sending the server a
    /// cancel when ``cancel()`` wakes it (again while the statement goes on). Returns at once when the connection
    /// is lost; `PQgetResult` then reports it.
    ///
    /// - Returns: `false` when `deadline` passed first: the socket is shut down, so the connection is broken from
    ///   here on and `PQgetResult` would only report that.
    private func waitUntilResultIsReady(_ handle: OpaquePointer, deadline: ContinuousClock.Instant) -> Bool {
        var cancelSent = false
        while PQisBusy(handle) != 0 {
            let wakeRead = cancellation.withLock { $0.wakeRead }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else {
                _ = shutdown(PQsocket(handle), Int32(SHUT_RDWR))
                _ = PQconsumeInput(handle)
                return false
            }
            switch Self.wait(
                socket: PQsocket(handle), stopDescriptor: wakeRead,
                timeout: cancelSent ? min(Self.cancelResendInterval, left) : left)
            {
            case .stopped:
                if takePendingCancel() {
                    sendCancel()
                    cancelSent = true
                }
            case .timedOut:
                if cancelSent { sendCancel() }
            case .readable:
                guard PQconsumeInput(handle) == 1 else { return true }
            }
        }
        return true
    }

    /// Asks the server to cancel this connection's statement (`PQcancel`, over a connection of its own), on a
    /// thread of its own: `PQcancel` blocks until the server closes that connection, and a silent server never
    /// does, so it must not hold the statement's thread past its answer deadline. One cancel is under way at a time
    /// (a resend while one waits does nothing); each has its own cancel object, freed by its thread, so closing the
    /// connection meanwhile frees nothing it uses. A failure is not reported: the statement then runs on, and the
    /// wait sends the cancel again.
    private func sendCancel() {
        guard let handle, let canceller = PQgetCancel(handle) else { return }
        guard cancelInFlight.begin() else {
            PQfreeCancel(canceller)
            return
        }
        let sender = CancelSender(canceller: canceller, inFlight: cancelInFlight)
        let thread = Thread { sender.send() }
        thread.name = "SessionKit.PostgresCancel"
        thread.start()
    }

    /// The rows of a finished statement, or the error its result or the connection reports.
    private static func interpret(_ result: OpaquePointer?, of handle: OpaquePointer) throws(PostgresError)
        -> PostgresResult
    {
        // A lost connection is `.unreachable` whatever the last result says (a terminated backend's last result
        // is its `57P01` error).
        guard PQstatus(handle) == CONNECTION_OK, let result else {
            let text = result.map { String(cString: PQresultErrorMessage($0)) } ?? ""
            throw PostgresError(.unreachable, message: text.isEmpty ? String(cString: PQerrorMessage(handle)) : text)
        }
        let status = PQresultStatus(result)
        switch status {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            let rowCount = PQntuples(result)
            let columnCount = PQnfields(result)
            let rows = (0..<rowCount).map { row in
                (0..<columnCount).map { column in
                    PQgetisnull(result, row, column) != 0 ? nil : String(cString: PQgetvalue(result, row, column))
                }
            }
            return PostgresResult(rows: rows, affectedRows: Int(String(cString: PQcmdTuples(result))) ?? 0)
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
            let sqlState = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PostgresError(
                sqlState.map { PostgresError.kind(sqlState: $0) } ?? .unreachable,
                message: String(cString: PQresultErrorMessage(result)))
        default:
            // `COPY` and the other streaming modes need calls this type does not make.
            throw PostgresError(
                .query(sqlState: "0A000"), message: "unsupported result status \(String(cString: PQresStatus(status)))")
        }
    }
}

/// Whether a connection's cancel is under way: shared by the connection and the cancel's thread, which may outlive
/// it (a silent server holds `PQcancel` for ever), so it is an object of its own, not the connection.
final class CancelInFlight: Sendable {
    private let sending = Atomic(false)

    /// Marks a cancel under way; `false` when one already is.
    func begin() -> Bool {
        sending.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// The cancel under way has finished.
    func end() {
        sending.store(false, ordering: .releasing)
    }
}

/// One `PQcancel` on a thread of its own, which owns the cancel object and frees it.
private final class CancelSender: @unchecked Sendable {
    private let canceller: OpaquePointer
    private let inFlight: CancelInFlight

    init(canceller: OpaquePointer, inFlight: CancelInFlight) {
        self.canceller = canceller
        self.inFlight = inFlight
    }

    func send() {
        var message = [CChar](repeating: 0, count: 256)
        _ = PQcancel(canceller, &message, Int32(message.count))
        PQfreeCancel(canceller)
        inFlight.end()
    }
}
