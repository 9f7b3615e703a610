import Dispatch
import SessionKit

/// A fixed number of PostgreSQL connections, each used by one caller at a time on a thread of its own.
///
/// libpq blocks the calling thread for the whole of a statement, and a blocked thread of Swift's cooperative pool
/// is one fewer for every task of the process: so each connection slot has its own serial dispatch queue, and a
/// caller's task suspends (it does not block) while its body runs there or while it waits for a free slot.
/// Connections open lazily, on a slot's first use, and a broken one is closed and replaced on the slot's next use.
///
/// - Important: Callers waiting for a slot are served in the order they arrived. Cancelling a caller's task while it
///   waits throws `CancellationError` without running its body; cancelling it while the body runs cancels the
///   connection's statement (``PostgresConnection/cancel()``), so even a statement that waits on a lock returns.
package final class PostgresPool: Sendable {
    /// One call of ``withConnection(_:)``, from its start to its end.
    private enum Call {
        /// Not yet given a slot, nor waiting for one; `cancelled` when its task was cancelled meanwhile.
        case starting(cancelled: Bool)
        /// Waiting for a free slot.
        case waiting(CheckedContinuation<Int, any Error>)
        /// Given the slot; `cancelled` when its task was cancelled since.
        case leased(slot: Int, cancelled: Bool)
    }

    /// Everything the lock guards.
    private struct State {
        /// Each slot's connection, `nil` until its first use or after it broke; a leased slot's is its caller's.
        var connections: [PostgresConnection?]
        /// The slots no call holds.
        var idle: [Int]
        /// Each call under way, by its identifier.
        var calls: [Int: Call] = [:]
        /// The identifiers of the waiting calls, oldest first; a cancelled one stays here until it is skipped.
        var queue: [Int] = []
        /// The next call's identifier.
        var nextCall = 0
        /// Whether ``close()`` ran.
        var isClosed = false
    }

    private let connectionString: String
    private let answerTimeout: Duration
    private let queues: [DispatchQueue]
    private let state: Lock<State>

    /// Makes a pool; no connection opens before the first call needs one.
    ///
    /// - Parameters:
    ///   - connectionString: The libpq connection string of every connection; never printed.
    ///   - size: The number of connections, and of threads that run callers' bodies; at least one.
    ///   - label: The name of the pool's threads, for a debugger.
    ///   - answerTimeout: Each connection's ``PostgresConnection/answerTimeout``.
    package init(
        connectionString: String, size: Int, label: String,
        answerTimeout: Duration = PostgresConnection.defaultAnswerTimeout
    ) {
        precondition(size > 0, "a pool needs at least one connection")
        self.connectionString = connectionString
        self.answerTimeout = answerTimeout
        queues = (0..<size).map { DispatchQueue(label: "\(label) \($0)") }
        state = Lock(State(connections: Array(repeating: nil, count: size), idle: Array((0..<size).reversed())))
    }

    deinit {
        close()
    }

    /// Runs `body` with a connection on the connection's own thread, waiting for a free one when all are busy.
    ///
    /// - Parameter body: Blocking work with the connection; it must not keep the connection after it returns.
    /// - Returns: What `body` returns.
    /// - Throws: `CancellationError` when the task was cancelled before `body` started; ``PostgresError`` when
    ///   connecting fails or the pool is closed; what `body` throws.
    package func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws -> T {
        let call = state.withLock { state in
            defer { state.nextCall += 1 }
            state.calls[state.nextCall] = .starting(cancelled: false)
            return state.nextCall
        }
        defer { _ = state.withLock { $0.calls.removeValue(forKey: call) } }
        return try await withTaskCancellationHandler {
            let slot = try await acquire(call)
            return try await withCheckedThrowingContinuation { continuation in
                queues[slot].async {
                    let result = self.run(body, call: call, slot: slot)
                    self.release(slot)
                    continuation.resume(with: result)
                }
            }
        } onCancel: {
            cancel(call)
        }
    }

    /// How many calls wait for a free connection now; for tests and a server's metrics.
    package var waitingCount: Int {
        state.withLock { state in
            state.queue.count { call in
                guard case .waiting = state.calls[call] else { return false }
                return true
            }
        }
    }

    /// Closes the idle connections and fails the waiting calls; a body running now keeps its connection, which
    /// closes when the body returns. Later calls throw ``PostgresError/Kind/unreachable``.
    package func close() {
        let (connections, waiting) = state.withLock { state in
            state.isClosed = true
            let connections = state.idle.compactMap { state.connections[$0] }
            for slot in state.idle { state.connections[slot] = nil }
            let waiting = state.queue.compactMap { call -> CheckedContinuation<Int, any Error>? in
                guard case .waiting(let continuation) = state.calls[call] else { return nil }
                state.calls[call] = .starting(cancelled: false)
                return continuation
            }
            state.queue = []
            return (connections, waiting)
        }
        for connection in connections { connection.close() }
        for continuation in waiting { continuation.resume(throwing: Self.closedError) }
    }

    private static var closedError: PostgresError { PostgresError(.unreachable, message: "pool closed") }

    /// A free slot for `call`, at once or when one is released.
    private func acquire(_ call: Int) async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let immediate: Result<Int, any Error>? = state.withLock { state in
                guard !state.isClosed else { return .failure(Self.closedError) }
                guard case .starting(cancelled: false) = state.calls[call] else { return .failure(CancellationError()) }
                if let slot = state.idle.popLast() {
                    state.calls[call] = .leased(slot: slot, cancelled: false)
                    return .success(slot)
                }
                state.calls[call] = .waiting(continuation)
                state.queue.append(call)
                return nil
            }
            if let immediate { continuation.resume(with: immediate) }
        }
    }

    /// Runs `body` on the slot's thread with its connection, opened or replaced first when needed.
    private func run<T>(_ body: (PostgresConnection) throws -> T, call: Int, slot: Int) -> Result<T, any Error> {
        var connection = state.withLock { $0.connections[slot] }
        if let broken = connection, broken.isBroken {
            broken.close()
            connection = nil
        }
        if connection == nil {
            do throws(PostgresError) {
                connection = try PostgresConnection(connectionString: connectionString, answerTimeout: answerTimeout)
            } catch {
                return .failure(error)
            }
        }
        guard let connection else { return .failure(Self.closedError) }
        // Before the connection is published: a cancel from here on is this call's, and reaches the statement.
        connection.clearCancellation()
        let cancelled = state.withLock { state in
            state.connections[slot] = connection
            guard case .leased(_, let cancelled) = state.calls[call] else { return true }
            return cancelled
        }
        if cancelled { return .failure(CancellationError()) }
        return Result { try body(connection) }
    }

    /// Gives the slot to the oldest waiting call, or makes it idle; closes its connection first when it broke or
    /// the pool closed.
    private func release(_ slot: Int) {
        let (broken, next) = state.withLock { state -> (PostgresConnection?, CheckedContinuation<Int, any Error>?) in
            var broken: PostgresConnection?
            if state.isClosed || state.connections[slot]?.isBroken == true {
                broken = state.connections[slot]
                state.connections[slot] = nil
            }
            if state.isClosed { return (broken, nil) }
            while !state.queue.isEmpty {
                let call = state.queue.removeFirst()
                if case .waiting(let continuation) = state.calls[call] {
                    state.calls[call] = .leased(slot: slot, cancelled: false)
                    return (broken, continuation)
                }
            }
            state.idle.append(slot)
            return (broken, nil)
        }
        broken?.close()
        next?.resume(returning: slot)
    }

    /// A cancelled task's call: a waiting one stops waiting; a leased one's statement is cancelled.
    ///
    /// The connection's cancel is called under the pool's lock (it only sets a flag and writes to a pipe): the
    /// slot cannot be released meanwhile, so the cancel never reaches the slot's next caller.
    private func cancel(_ call: Int) {
        let waiting = state.withLock { state -> CheckedContinuation<Int, any Error>? in
            switch state.calls[call] {
            case .starting:
                state.calls[call] = .starting(cancelled: true)
            case .waiting(let continuation):
                state.calls[call] = .starting(cancelled: true)
                return continuation
            case .leased(let slot, _):
                state.calls[call] = .leased(slot: slot, cancelled: true)
                state.connections[slot]?.cancel()
            case nil:
                break
            }
            return nil
        }
        waiting?.resume(throwing: CancellationError())
    }
}
