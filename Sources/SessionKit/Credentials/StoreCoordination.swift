import SessionKitOAuth

/// How the processes sharing one credential store keep a refresh single-flight and tell each other of endings: a
/// lock scoped to an account, and a notice that records may have been deleted.
///
/// A session whose store has a coordination (``CredentialStore/coordination``) holds the account's lock only around
/// "re-read the stored record, refresh if it still needs it, store the result", so a process that waited adopts the
/// tokens another one stored instead of presenting the refresh token that one already rotated. Deleting a record
/// holds the lock too, then announces the change: every ``SessionManager`` on the store checks its sessions of the
/// account against the store, and ends those whose record is gone. A notice says only what to check, never what to
/// do: a lost or forged notice can neither sign anyone out nor keep anyone signed in.
///
/// ``CrossProcessLock`` coordinates the processes of one machine (one lock file for every account, a notice file
/// beside it); `PostgresCredentialStore` (the `SessionKitPostgres` library) coordinates the instances of a server
/// through the database (an advisory lock per account, `LISTEN`/`NOTIFY`).
public protocol StoreCoordination: Sendable {
    /// The longest a refresh waits for a lock before failing with `refreshTimedOut` (the session stays signed in and
    /// the next request tries again); a deletion waits as long, then deletes anyway.
    var timeout: Duration { get }

    /// Waits for the lock of `account`, at most ``timeout``.
    ///
    /// A holder that dies must release the lock with its death (a closed descriptor, a closed connection), so a
    /// killed process never blocks the others for longer than it takes the system to notice.
    ///
    /// - Parameter account: The account whose refresh or deletion the lock serializes.
    /// - Returns: The held lock; release it exactly once.
    /// - Throws: ``SessionError`` `refreshTimedOut` when ``timeout`` passed, `storeUnavailable` when the lock's home
    ///   cannot be reached now, `storageFailure` otherwise; `CancellationError` when the waiting task was cancelled.
    func lock(for account: Account) async throws -> HeldStoreLock

    /// Tells every process on the store that `account`'s record may have been deleted. A notice that cannot be sent
    /// is lost: the other processes learn of the deletion at their next refresh, which finds the record gone, or
    /// when their watch reconnects (``watchChanges(_:)``).
    ///
    /// - Parameter account: The account whose record changed.
    func announceChange(of account: Account) async

    /// Starts watching for announcements, this process's own included.
    ///
    /// - Parameter onChange: Called for each notice, or batch of notices, on a thread of the watch's own: it must
    ///   only start work. A watch that may have missed notices (its connection dropped, its queue overflowed) says
    ///   ``StoreChange/Scope/everyAccount`` once it watches again.
    /// - Returns: The watch, or `nil` when this platform or store cannot watch: the processes then learn of
    ///   deletions at their next refresh.
    func watchChanges(_ onChange: @escaping @Sendable (StoreChange) -> Void) -> (any StoreChangeWatch)?
}

/// A lock of a ``StoreCoordination``, held.
public struct HeldStoreLock: Sendable {
    private let releaseBody: @Sendable () -> Void

    /// Wraps what releases the lock.
    ///
    /// - Parameter release: Releases it; called once, from any thread, and must not block on the network (hand a
    ///   server round trip to a queue of the lock's own).
    public init(release: @escaping @Sendable () -> Void) {
        self.releaseBody = release
    }

    /// Releases the lock. Call it exactly once.
    public func release() {
        releaseBody()
    }
}

/// An announcement a ``StoreCoordination`` watch received.
public struct StoreChange: Sendable, Equatable {
    /// Which sessions to check against the store.
    public enum Scope: Sendable, Equatable {
        /// Every live session: the notice named no account, or notices may have been missed.
        case everyAccount
        /// The sessions of the accounts with these ``Account/resourceTag``s (a hash, so a notice never spells a
        /// subject).
        case accounts(Set<String>)

        /// The scope that checks what both check.
        ///
        /// - Parameter other: Another scope.
        /// - Returns: Their union.
        public func union(_ other: Scope) -> Scope {
            switch (self, other) {
            case (.accounts(let mine), .accounts(let theirs)): .accounts(mine.union(theirs))
            default: .everyAccount
            }
        }

        /// Whether a session of `account` is to be checked.
        ///
        /// - Parameter account: The session's account.
        /// - Returns: `true` for ``everyAccount``, or when the account's tag is listed.
        public func includes(_ account: Account) -> Bool {
            switch self {
            case .everyAccount: true
            case .accounts(let tags): tags.contains(account.resourceTag)
            }
        }
    }

    /// Which sessions to check.
    public let scope: Scope
    /// Whether this process sent it, for the story told (``DiagnosticEvent/Kind/crossProcessNotice``'s `from`)
    /// only: every notice is checked against the store whoever sent it.
    public let fromThisProcess: Bool

    /// A change.
    ///
    /// - Parameters:
    ///   - scope: Which sessions to check.
    ///   - fromThisProcess: Whether this process sent it.
    public init(scope: Scope, fromThisProcess: Bool) {
        self.scope = scope
        self.fromThisProcess = fromThisProcess
    }
}

/// A running watch of a ``StoreCoordination``'s announcements.
public protocol StoreChangeWatch: Sendable {
    /// Stops watching: the handler is not called once this returns and the watch's thread has seen it. Idempotent.
    func stop()
}

extension StoreCoordination {
    /// Runs `body` holding `account`'s lock.
    ///
    /// - Parameters:
    ///   - account: The account.
    ///   - body: The work.
    /// - Returns: What `body` returns.
    /// - Throws: What ``lock(for:)`` or `body` throws.
    func withLock<T>(for account: Account, _ body: () async throws -> T) async throws -> T {
        let held = try await lock(for: account)
        defer { held.release() }
        return try await body()
    }
}
