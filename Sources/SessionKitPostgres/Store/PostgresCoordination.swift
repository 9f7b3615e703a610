import Dispatch
import SessionKit
import SessionKitOAuth

/// The coordination of a ``PostgresCredentialStore``'s instances: a transaction-scoped advisory lock per account,
/// and `NOTIFY`/`LISTEN` on one channel for endings.
///
/// A held lock is an open transaction on a connection of the lock pool, kept apart from the pool that reads and
/// writes records: a holder's re-read and save never wait for a connection another holder (or waiter) occupies.
final class PostgresCoordination: StoreCoordination {
    /// The channel every instance listens on.
    static let channel = "sessionkit_changes"
    /// Who this process signs its notices as: a random number drawn once per process (process identifiers repeat
    /// across machines).
    static let sender = String(UInt64.random(in: 1...UInt64.max), radix: 16)

    let timeout: Duration
    private let connectionString: String
    private let answerTimeout: Duration
    private let records: PostgresPool
    private let locks: PostgresPool

    init(
        connectionString: String, records: PostgresPool, locks: PostgresPool, timeout: Duration,
        answerTimeout: Duration
    ) {
        self.connectionString = connectionString
        self.answerTimeout = answerTimeout
        self.records = records
        self.locks = locks
        self.timeout = timeout
    }

    /// The advisory lock key of `account`: the first eight bytes of the SHA-256 of its storage key. Two accounts
    /// whose keys collide only wait for each other.
    static func lockKey(of account: Account) -> Int64 {
        let digest = PlatformCrypto.digest(.sha256, of: Array(account.storageKey.utf8))
        return digest.prefix(8).reduce(Int64(0)) { ($0 << 8) | Int64($1) }
    }

    /// Opens a transaction on a lock connection and waits in `pg_advisory_xact_lock` for the account's key, at most
    /// ``timeout`` (counting the wait for a free connection): the server's `lock_timeout`, not a poll. The lock is
    /// held until ``HeldStoreLock/release()`` commits the transaction, or the connection closes.
    func lock(for account: Account) async throws -> HeldStoreLock {
        let key = String(Self.lockKey(of: account))
        let deadline = ContinuousClock.now.advanced(by: timeout)
        let timeout = self.timeout
        let hold = LockHold()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                hold.begin(continuation)
                let task = Task { [locks] in
                    do {
                        try await locks.withConnection { connection in
                            let remaining = deadline - ContinuousClock.now
                            guard remaining > .zero else { throw LockHold.TimedOut() }
                            let milliseconds = max(1, Int((remaining / .milliseconds(1)).rounded(.up)))
                            _ = try connection.execute("BEGIN")
                            do {
                                _ = try connection.execute(
                                    "SELECT set_config('lock_timeout', $1, true)", ["\(milliseconds)ms"])
                                // The server answers when the lock is had or `lock_timeout` passed: its answer is
                                // late only past both.
                                _ = try connection.execute(
                                    "SELECT pg_advisory_xact_lock($1::bigint)", [key],
                                    answerTimeout: remaining + connection.answerTimeout)
                            } catch {
                                _ = try? connection.execute("ROLLBACK")
                                throw error
                            }
                            hold.acquired()
                            // This is the lock pool's own thread, and its connection is the lock: it waits here, on
                            // no cooperative thread, until the holder releases.
                            hold.waitForRelease()
                            // A commit that fails means the connection is gone, and the server released the lock
                            // with it.
                            _ = try? connection.execute("COMMIT")
                        }
                    } catch {
                        hold.failed(Self.lockError(error, timeout: timeout))
                    }
                }
                hold.started(task)
            }
        } onCancel: {
            hold.cancel()
        }
    }

    /// The error a lock wait reports.
    private static func lockError(_ error: any Error, timeout: Duration) -> any Error {
        if error is CancellationError { return CancellationError() }
        if error is LockHold.TimedOut {
            return SessionError(.refreshTimedOut, "waited for a free lock connection for more than \(timeout)")
        }
        guard let failure = error as? PostgresError else { return SessionError(postgres: error, while: "lock") }
        switch failure.kind {
        case .lockTimeout:
            return SessionError(
                .refreshTimedOut, "another instance has held the account's lock for more than \(timeout)")
        case .cancelled:
            return CancellationError()
        default:
            return SessionError(postgres: failure, while: "take the account's lock")
        }
    }

    /// Sends `NOTIFY sessionkit_changes` naming the account by its tag; a notice that cannot be sent is lost (the
    /// others learn at their next refresh, or when their listener reconnects).
    func announceChange(of account: Account) async {
        let payload = "\(Self.sender) \(account.resourceTag)"
        _ = try? await records.withConnection { connection in
            _ = try connection.execute("SELECT pg_notify($1, $2)", [Self.channel, payload])
        }
    }

    /// Listens on a connection of its own, on a thread of its own.
    func watchChanges(_ onChange: @escaping @Sendable (StoreChange) -> Void) -> (any StoreChangeWatch)? {
        PostgresChangeListener(connectionString: connectionString, answerTimeout: answerTimeout, onChange: onChange)
    }

    /// Closes the lock pool.
    func close() {
        locks.close()
    }
}

/// One lock wait and hold: hands the held lock to the waiting task, and parks the lock connection's thread until
/// the holder releases.
final class LockHold: Sendable {
    struct TimedOut: Error {}

    private enum Phase {
        case waiting(CheckedContinuation<HeldStoreLock, any Error>?, Task<Void, Never>?, cancelled: Bool)
        case held
        case done
    }

    private let phase = Lock(Phase.waiting(nil, nil, cancelled: false))
    private let released = DispatchSemaphore(value: 0)

    /// The one critical section: every step is a change of the phase.
    private func update<T>(_ body: (inout Phase) -> T) -> T {
        phase.withLock(body)
    }

    func begin(_ continuation: CheckedContinuation<HeldStoreLock, any Error>) {
        update { $0 = .waiting(continuation, nil, cancelled: false) }
    }

    /// The task waiting for the lock; cancelled at once when the caller was cancelled before it started.
    func started(_ task: Task<Void, Never>) {
        let cancel = update { phase -> Bool in
            guard case .waiting(let continuation, nil, let cancelled) = phase else { return false }
            phase = .waiting(continuation, task, cancelled: cancelled)
            return cancelled
        }
        if cancel { task.cancel() }
    }

    /// The caller was cancelled: a wait still running is cancelled (the pool cancels its statement); a lock already
    /// handed over stays the caller's to release.
    func cancel() {
        let task = update { phase -> Task<Void, Never>? in
            guard case .waiting(let continuation, let task, _) = phase else { return nil }
            phase = .waiting(continuation, task, cancelled: true)
            return task
        }
        task?.cancel()
    }

    func acquired() {
        let continuation = update { phase -> CheckedContinuation<HeldStoreLock, any Error>? in
            guard case .waiting(let continuation, _, _) = phase else { return nil }
            phase = .held
            return continuation
        }
        continuation?.resume(returning: HeldStoreLock { [released] in released.signal() })
    }

    func failed(_ error: any Error) {
        let continuation = update { phase -> CheckedContinuation<HeldStoreLock, any Error>? in
            guard case .waiting(let continuation, _, _) = phase else { return nil }
            phase = .done
            return continuation
        }
        continuation?.resume(throwing: error)
    }

    func waitForRelease() {
        released.wait()
    }
}
