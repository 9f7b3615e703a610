import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One signed-in account's session: the object whose lifetime bounds every request, cache entry and
/// credential made on that account's behalf.
///
/// Every request goes through the session and carries this session's token, never "the current token".
/// ``end()`` flips ``isActive`` once and for all, cancels every request in flight, invalidates the session's
/// own `URLSession`, drops its cache and cookies and forgets its tokens. After that, the session starts no
/// request and stores no credential: a request is refused with ``SessionError/Code/sessionEnded``.
///
/// A re-login of the same account creates a new session object: compare sessions by identity (`===`), never by
/// account, when deciding whether a result may be committed.
///
/// - Important: Task creation and the flip of ``isActive`` happen under one lock, so no task is ever created
///   on an invalidated `URLSession` (a fatal error on Linux), and every task created before ``end()`` is among
///   those it cancels.
public final class UserSession: Sendable, Identifiable, CustomStringConvertible {
    /// A session's number, unique per sign-in within the process and never reused: what SessionKit's own records
    /// of a session compare, where an object identifier could name a later session at the same address.
    package struct Serial: Hashable, Sendable, CustomStringConvertible {
        private static let counter = Lock<UInt64>(0)

        /// The sign-in's number: it increases within the process and is never reused, so two sign-ins of the
        /// same account always differ.
        package let rawValue: UInt64

        fileprivate static func next() -> Serial {
            Serial(
                rawValue: counter.withLock { count in
                    count &+= 1
                    return count
                })
        }

        /// `session-<n>`.
        package var description: String { "session-\(rawValue)" }
    }

    /// How a session sends requests.
    public struct Configuration: Sendable {
        /// The longest a single attempt of a request may take: a wall-clock deadline that SessionKit enforces
        /// from the moment the attempt starts to the last byte of its answer, however the server paces it. At the
        /// deadline the attempt is cancelled and fails with `timedOut` (`outcomeUnknown` for a request that is not
        /// replayable); it is measured in real time, whatever ``clock`` says.
        public var requestTimeout: Duration
        /// When requests are replayed after transport failures and retryable statuses.
        public var retryPolicy: RetryPolicy
        /// The byte bound of the session's private response cache; `0` disables caching.
        public var cacheMaximumBytes: Int
        /// Whether the access token is written to the credential store too (off: it stays in memory only).
        public var storesAccessToken: Bool
        /// The most bytes one request of a ``UserSession/download(for:progress:)`` asks for: a GET download is
        /// fetched in ranges of this size when the server honours ranges, so that memory stays bounded by it however
        /// slowly the disk takes the bytes; 16 MiB by default, `0` for one request per download.
        public var downloadSegmentBytes: Int
        /// The clock for expiry and backoff. ``requestTimeout`` runs in real time, not on this clock, so that a
        /// test's manual clock never ends a request in flight.
        public var clock: any SessionClock
        /// Where the session's credentials may go: which origins receive its token, plain HTTP, the app's own
        /// credential header fields, `https` to `http` redirects. By default every `https` origin and the loopback
        /// interface; a redirect to another origin never carries a credential, whatever the scope.
        public var credentialScope: CredentialScope
        /// Tests only: runs between a request's task creation and its start, so a test can end the session in
        /// exactly that window. `nil` (one branch per request) everywhere else.
        var beforeStart: (@Sendable (UserSession) -> Void)?

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - requestTimeout: The wall-clock deadline of each attempt.
        ///   - retryPolicy: Replay rules.
        ///   - cacheMaximumBytes: Cache bound; `0` disables it.
        ///   - storesAccessToken: Whether the access token is persisted too.
        ///   - downloadSegmentBytes: The range one request of a download asks for; `0` for one request.
        ///   - clock: The clock to read.
        ///   - credentialScope: Where the session's credentials may go.
        public init(
            requestTimeout: Duration = .seconds(30),
            retryPolicy: RetryPolicy = RetryPolicy(),
            cacheMaximumBytes: Int = 4 * 1024 * 1024,
            storesAccessToken: Bool = false,
            downloadSegmentBytes: Int = 16 * 1024 * 1024,
            clock: (any SessionClock)? = nil,
            credentialScope: CredentialScope = CredentialScope()
        ) {
            self.credentialScope = credentialScope
            self.requestTimeout = requestTimeout
            self.retryPolicy = retryPolicy
            self.cacheMaximumBytes = cacheMaximumBytes
            self.storesAccessToken = storesAccessToken
            self.downloadSegmentBytes = downloadSegmentBytes
            self.clock = clock ?? SystemClock()
        }
    }

    struct Lifetime {
        var isActive = true
        /// The tokens the session holds; set with ``hold(_:refreshedBy:)``, which derives the next two from them.
        private(set) var tokens: TokenSet?
        /// When `tokens`' access token starts to count as expiring: its expiry less the refresher's margin
        /// (``TokenRefresher/expiringFrom(_:)``), worked out once when the tokens are set so that the check before
        /// every request is one comparison; `nil` for a token without an expiry, or a session without a refresher.
        private(set) var expiringFrom: ContinuousClock.Instant?
        /// The access token and the `Authorization` value that carries it, built once when the tokens are set,
        /// not on every attempt.
        private(set) var credential: Credential?
        /// The `data(for:)` calls that have not returned: what `end()` answers and cancels.
        var requests: [Int: InFlightRequest] = [:]
        var nextTaskID = 0
        /// What runs at the end, by registration number (``addEndHandler(_:)``), so a handler can be removed.
        var endHandlers: [Int: @Sendable () -> Void] = [:]
        var eventHandler: (@Sendable (SessionEvent) -> Void)?
        var writes: [Int: PendingWrite] = [:]
        var handoffSession: URLSession?
        /// The URLSession of uploads, downloads, byte streams and WebSockets, created on the first one
        /// (`UserSession+Transfers.swift`); the end handler it registers cancels its tasks and invalidates it.
        var transfers: TransferSession?
        /// Where ``download(for:progress:)`` writes: set by the manager to the account's directory; `nil` for a
        /// private temporary directory created on the first download and removed when the session ends.
        var downloadsDirectory: URL?
        /// Set when a sign-out has queued the deletion of the account's record: from then on refreshed tokens
        /// are kept in memory (for the session's last requests and for revocation) and never stored.
        var credentialWritesSealed = false
        /// When the session last became the app's current one; stored with its record.
        var selectedAt: Date?

        /// Holds `tokens`, with what every request needs from them worked out once: the instant their access token
        /// counts as expiring (by `refresher`'s margin; none without a refresher) and the `Authorization` value.
        mutating func hold(_ tokens: TokenSet?, refreshedBy refresher: TokenRefresher?) {
            self.tokens = tokens
            expiringFrom = tokens.flatMap { refresher?.expiringFrom($0) }
            credential = tokens.map { Credential(token: $0.accessToken, authorization: "Bearer \($0.accessToken)") }
        }

        /// Whether the access token counts as expiring at `now`, and is refreshed before it is sent.
        func isExpiring(at now: ContinuousClock.Instant) -> Bool {
            expiringFrom.map { now >= $0 } ?? false
        }
    }

    /// An access token and the `Authorization` header value that sends it.
    struct Credential {
        let token: String
        let authorization: String
    }

    /// What `finish` found when it ended the session.
    struct Ending {
        /// How many requests were in flight and cancelled.
        let cancelledRequests: Int
        /// The tokens the session held at the instant it ended: what a sign-out revokes.
        let tokens: TokenSet?
    }

    struct PendingWrite: Sendable {
        let policy: WritePolicy
        let done: Broadcast<Void>
    }

    enum RefreshCommit {
        case ended
        case committed(accessToken: String, write: Task<(any Error)?, Never>?)
    }

    /// This sign-in's number.
    package let serial: Serial
    /// The session's identity while it lives (`Identifiable`, for SwiftUI lists): the object's own.
    public var id: ObjectIdentifier { ObjectIdentifier(self) }
    /// Who the session acts for.
    public let account: Account
    /// How the session sends requests.
    public let configuration: Configuration
    /// The session's private HTTP cache (<doc:Caching>): no other session can read it, and ``end()`` empties it.
    package let cache: ResponseCache
    let urlSession: URLSession
    let vault: CredentialVault?
    let ledger: WriteLedger?
    let refresher: TokenRefresher?
    let lifetime: Lock<Lifetime>
    /// Whether transfers (uploads, downloads, byte streams, WebSockets) may still start: lowered by `end()` right
    /// after ``isActive``, read by every transfer's start under a lock of its own that is never held across `resume()`
    /// (a data request's last check is its registration, under the lifetime lock). A start that reads it raised
    /// resumes its task; `end()` cancels that task like every other it took, whether the resume lands before or after
    /// the cancellation (a cancelled task never starts). So `end()` never waits for starts under way, and no start
    /// holds a lock across `resume()`.
    let admitsStarts = Lock(true)
    /// Whether the data URLSession may still create tasks: held for reading while `data(for:)` creates one, lowered
    /// (held for writing) just before the URLSession is invalidated (FoundationNetworking stops the process when a
    /// task is created on an invalidated session), on the queue that invalidates it, so that `end()` never waits for a
    /// creation under way. Not the lifetime lock: creating a task waits for FoundationNetworking's work queue, and
    /// every request's token check, registration and forgetting would wait with it. Shared, not exclusive: concurrent
    /// requests create their tasks at once, each waiting only for that queue, as a bare URLSession's callers do; with
    /// a mutex each waited for the creation before it too (`request.ratio.concurrent8` 0.947–0.973 with a mutex,
    /// 0.960–0.973 shared, three runs each alternating; nginx 0.962–0.976 and 0.973–0.992).
    let creation = SharedLock(true)

    /// Creates an active session for `account` holding `tokens`.
    ///
    /// Apps usually let ``SessionManager`` create sessions (``SessionManager/signIn(_:tokens:makeCurrent:)``), so
    /// that sign-out, account switching and restore see them. Create one directly in a command-line tool, a
    /// server acting for one user, or a test.
    ///
    /// - Parameters:
    ///   - account: Who the session acts for.
    ///   - tokens: The session's credentials.
    ///   - configuration: How it sends requests.
    ///   - store: Where rotated credentials are written, each account's writes in the order they were made; `nil`
    ///     keeps them in memory only.
    ///   - tokenEndpoint: How to refresh; `nil` means a 401 cannot be recovered.
    ///   - refreshPolicy: When and how often to refresh.
    public convenience init(
        account: Account,
        tokens: TokenSet,
        configuration: Configuration = Configuration(),
        store: (any CredentialStore)? = nil,
        tokenEndpoint: (any TokenEndpoint)? = nil,
        refreshPolicy: RefreshPolicy = RefreshPolicy()
    ) {
        self.init(
            account: account, tokens: tokens, configuration: configuration, vault: store.map(CredentialVault.init),
            tokenEndpoint: tokenEndpoint, refreshPolicy: refreshPolicy, ledger: nil)
    }

    /// Creates an active session whose rotated credentials go through `vault` (the manager's, shared by all its
    /// sessions, so that one account's writes and its purge stay in order).
    package init(
        account: Account,
        tokens: TokenSet,
        configuration: Configuration = Configuration(),
        vault: CredentialVault?,
        tokenEndpoint: (any TokenEndpoint)? = nil,
        refreshPolicy: RefreshPolicy = RefreshPolicy(),
        ledger: WriteLedger? = nil
    ) {
        self.serial = .next()
        self.ledger = ledger
        self.account = account
        self.configuration = configuration
        self.vault = vault
        self.cache = ResponseCache(maximumBytes: configuration.cacheMaximumBytes, clock: configuration.clock)
        let refresher = tokenEndpoint.map {
            TokenRefresher(endpoint: $0, policy: refreshPolicy, clock: configuration.clock)
        }
        self.refresher = refresher
        var lifetime = Lifetime()
        lifetime.hold(tokens, refreshedBy: refresher)
        self.lifetime = Lock(lifetime)

        // Ephemeral: its own cookie and credential storage, nothing on disk. Foundation's URLCache is off:
        // the session's ResponseCache is the only cache, and it is this session's alone.
        let urlConfiguration = URLSessionConfiguration.ephemeral
        urlConfiguration.urlCache = nil
        urlConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        urlConfiguration.httpShouldSetCookies = true
        urlConfiguration.timeoutIntervalForRequest = configuration.requestTimeout.urlSessionTimeout
        urlConfiguration.httpMaximumConnectionsPerHost = 64
        #if canImport(FoundationNetworking)
            // Its completion handlers run on its own work queue (they only hand their answer on), not through an
            // operation queue's thread: a sixth of a loopback request's latency on Linux.
            self.urlSession = URLSession(
                configuration: urlConfiguration, delegate: RedirectRefusal.shared,
                delegateQueue: ImmediateDelegateQueue())
        #else
            self.urlSession = URLSession(
                configuration: urlConfiguration, delegate: RedirectRefusal.shared, delegateQueue: nil)
        #endif
    }

    /// Whether the session may still start work and commit results. Once `false`, it never becomes `true`.
    public var isActive: Bool { lifetime.withLock { $0.isActive } }

    /// The tokens the session holds now, or `nil` once it has ended.
    ///
    /// For inspection and tests. Requests get their token from the session when they are sent; copying this
    /// value into a request of your own would send it after a refresh replaced it, or after the session ended.
    public var tokens: TokenSet? { lifetime.withLock { $0.tokens } }

    /// The number of requests in flight.
    package var requestsInFlight: Int { lifetime.withLock { $0.requests.count } }

    /// The account and the session's identity.
    public var description: String { "UserSession(\(serial), \(account))" }

    /// Runs `handler` once, synchronously, when the session ends; at once if it already has.
    ///
    /// - Parameter handler: What to run. It must not call back into this session's ``end()``.
    public func onEnd(_ handler: @escaping @Sendable () -> Void) {
        addEndHandler(handler)
    }

    deinit {
        // Dropped without `end()`: nothing can use the URLSession any more (a request in flight keeps its session
        // alive), but it would keep its connections and, on Linux, the two descriptors of its libcurl multi
        // handle for the rest of the process. Its tasks' handlers hold this session weakly, so nothing else does.
        let (active, handoff, transfers) = lifetime.withLock { ($0.isActive, $0.handoffSession, $0.transfers) }
        guard active else { return }  // `end()` invalidated them all.
        urlSession.finishTasksAndInvalidate()
        handoff?.finishTasksAndInvalidate()
        transfers?.urlSession.finishTasksAndInvalidate()
    }

    /// Ends the session: flips ``isActive`` once, cancels every request in flight, invalidates the
    /// `URLSession`, drops the cache and cookies, forgets the tokens and stops the refresher.
    ///
    /// Idempotent: only the first call does anything. It returns without waiting for the cancelled requests;
    /// each `data(for:)` call in flight throws ``SessionError/Code/sessionEnded`` at once, on a background queue,
    /// before FoundationNetworking has stopped its transfer (which, with many in flight on Linux, can take seconds).
    /// Its duration does not grow with the number of requests in flight: the URLSession calls that stop their
    /// transfers run on that background queue too.
    ///
    /// - Returns: How many requests were in flight and cancelled (0 for calls after the first).
    /// - Important: Once `end()` returns, the session starts no request (one that had not passed its start when
    ///   `end()` flipped ``isActive`` never will; one whose start was under way at that instant is cancelled with
    ///   the others, whichever of its start and its cancellation URLSession sees first), hands over no response,
    ///   and admits no credential write. `end()` never waits for a start under way.
    @discardableResult
    public func end() -> Int {
        finish(refreshError: nil)?.cancelledRequests ?? 0
    }

    /// Ends the session, running `whileEnding` at the moment it stops admitting credential writes.
    ///
    /// - Parameters:
    ///   - refreshError: What a refresh in flight fails with; `nil` for `sessionEnded`.
    ///   - whileEnding: Called once, under the lock that admits credential writes, with the refresh token the
    ///     session holds, just before the session stops being active: a deletion it enqueues runs behind every
    ///     write the session admitted, and is already queued when anyone can see the session has ended. It must
    ///     only enqueue work. Not called if the session had already ended.
    /// - Returns: How many requests were cancelled and the tokens the session held, or `nil` if the session had
    ///   already ended.
    @discardableResult
    func finish(refreshError: SessionError?, whileEnding: ((String?) -> Void)? = nil) -> Ending? {
        typealias Ended = (
            requests: [Int: InFlightRequest], handlers: [Int: @Sendable () -> Void], handoff: URLSession?,
            tokens: TokenSet?
        )
        let ended = lifetime.withLock { lifetime -> Ended? in
            guard lifetime.isActive else { return nil }
            whileEnding?(lifetime.tokens?.refreshToken)
            lifetime.isActive = false
            let tokens = lifetime.tokens
            lifetime.hold(nil, refreshedBy: nil)
            // Moved out whole, not copied: ending costs the same whatever is in flight.
            let requests = lifetime.requests
            lifetime.requests = [:]
            let handlers = lifetime.endHandlers
            lifetime.endHandlers.removeAll()
            return (requests, handlers, lifetime.handoffSession, tokens)
        }
        guard let ended else { return nil }
        // Nothing can create a task any more (the flag is down), and from here no start that has not checked yet
        // resumes its task: it answers it as cancelled. A start that checked before is cancelled below with every
        // other request `end()` took, without waiting for it.
        admitsStarts.withLock { $0 = false }
        // Cancelling URLSession tasks waits for the session's work queue once per task, behind the cancellations
        // before it: with 1,000 requests in flight that is a second to minutes on Linux. It runs on another queue
        // (the session's `endings` on Linux, its delegate queue elsewhere), so ending a session takes the same few
        // microseconds whatever is in flight. On that queue, before any cancellation, every caller is answered
        // with `sessionEnded`: callers learn of the end without waiting for FoundationNetworking to stop their
        // transfers. A response that still arrives meanwhile is dropped: the call was answered already, and
        // `data(for:)` checks `isActive` after every answer anyway.
        let requests = ended.requests
        urlSession.cancelWithoutRacingCompletion(
            requests.values, thenInvalidate: true, closing: creation,
            first: { for request in requests.values { request.answer.resume(throwing: SessionError.ended) } })
        // Handed-off writes finish on their own session; it accepts no new task from now on.
        ended.handoff?.finishTasksAndInvalidate()
        urlSession.configuration.httpCookieStorage?.removeCookies(since: .distantPast)
        cache.removeAll()
        if let refreshError { refresher?.sessionEnded(with: refreshError) } else { refresher?.sessionEnded() }
        for key in ended.handlers.keys.sorted() { ended.handlers[key]?() }
        return Ending(cancelledRequests: ended.requests.count, tokens: ended.tokens)
    }

    /// Stops the session storing credentials and runs `enqueue` at that instant, under the lock that admits
    /// credential writes: a deletion it enqueues runs behind every write the session admitted, and no write is
    /// admitted after it. The session stays active (its requests go on with the tokens in memory) until `end()`.
    ///
    /// - Parameter enqueue: Called once, if the session is active; it must only enqueue work.
    /// - Returns: Whether the session was active.
    @discardableResult
    func sealCredentials(thenEnqueue enqueue: () -> Void) -> Bool {
        lifetime.withLock { lifetime in
            guard lifetime.isActive else { return false }
            if !lifetime.credentialWritesSealed { enqueue() }
            lifetime.credentialWritesSealed = true
            return true
        }
    }

    /// Records that the session became the app's current one by a switch, and stores that with its record.
    ///
    /// With a store shared between processes the write holds the refresh lock and re-reads the record first: when
    /// another process has rotated the tokens since this one read them, the record keeps that process's tokens and
    /// only the selection changes, so a switch never writes back a refresh token the server has retired. A record
    /// that is gone (signed out elsewhere) is not written back.
    ///
    /// - Parameter date: When.
    /// - Returns: The pending store write, or `nil` when nothing is written.
    @discardableResult
    func markSwitchedTo(at date: Date) -> Task<(any Error)?, Never>? {
        guard let vault, let lock = vault.store.refreshLock else { return markSelected(at: date) }
        let admitted = lifetime.withLock { lifetime -> Bool in
            guard lifetime.isActive, !lifetime.credentialWritesSealed, lifetime.tokens != nil else { return false }
            lifetime.selectedAt = date
            return true
        }
        guard admitted else { return nil }
        let account = account
        return Task {
            // Without the lock (another process held it past the bound) the selection is not stored: it is not worth
            // a write that could put back a retired token.
            guard let held = try? await lock.acquire() else { return nil }
            defer { held.release() }
            guard let stored = try? await vault.store.load(for: account) else { return nil }
            let write = lifetime.withLock { lifetime -> Task<(any Error)?, Never>? in
                guard lifetime.isActive, !lifetime.credentialWritesSealed, let tokens = lifetime.tokens else {
                    return nil
                }
                var record = record(for: tokens, selectedAt: date)
                if stored.refreshToken != tokens.refreshToken {
                    record = stored
                    record.selectedAt = date
                }
                return vault.enqueueSave(record)
            }
            return await write?.value
        }
    }

    /// Takes the moment the session was last current from its stored record, at restore; writes nothing.
    func restoreSelection(_ date: Date?) {
        lifetime.withLock { $0.selectedAt = date }
    }

    /// Records that the session became the app's current one, and stores that with its record.
    ///
    /// - Parameter date: When.
    /// - Returns: The pending store write, or `nil` when nothing is written.
    @discardableResult
    func markSelected(at date: Date) -> Task<(any Error)?, Never>? {
        lifetime.withLock { lifetime in
            guard lifetime.isActive, !lifetime.credentialWritesSealed, let tokens = lifetime.tokens else { return nil }
            lifetime.selectedAt = date
            return vault?.enqueueSave(record(for: tokens, selectedAt: date))
        }
    }

    // MARK: - Token commit

    /// Replaces the session's tokens with a refresh result and admits its credential write, in one step that
    /// first checks the session is still active.
    ///
    /// - Parameter tokens: The refresh result.
    /// - Returns: `.ended` when the session ended (the result is dropped), else the new access token and the
    ///   pending store write.
    func commitRefreshed(_ tokens: TokenSet) -> RefreshCommit {
        lifetime.withLock { lifetime -> RefreshCommit in
            guard lifetime.isActive else { return .ended }
            var merged = tokens
            // RFC 6749 §6: a response without a refresh token keeps the old one.
            if merged.refreshToken == nil { merged.refreshToken = lifetime.tokens?.refreshToken }
            lifetime.hold(merged, refreshedBy: refresher)
            // A sign-out has queued the record's deletion: the tokens serve the session's last requests and its
            // revocation, and are stored nowhere.
            guard !lifetime.credentialWritesSealed else {
                return .committed(accessToken: merged.accessToken, write: nil)
            }
            // Enqueued under the lifetime lock: a purge enqueued after `end()` runs behind this write.
            let record = record(for: merged, selectedAt: lifetime.selectedAt)
            return .committed(accessToken: merged.accessToken, write: vault?.enqueueSave(record))
        }
    }

    /// Replaces the session's tokens with those another process stored, in one step that first checks the session
    /// is still active; writes nothing (they are the stored record already).
    ///
    /// - Parameter tokens: The tokens read from the store.
    /// - Returns: `.ended` when the session ended (the tokens are dropped), else the access token.
    func adoptStored(_ tokens: TokenSet) -> RefreshCommit {
        lifetime.withLock { lifetime -> RefreshCommit in
            guard lifetime.isActive else { return .ended }
            lifetime.hold(tokens, refreshedBy: refresher)
            return .committed(accessToken: tokens.accessToken, write: nil)
        }
    }

    /// Ends the session because another process signed its account out: its record is gone from the shared store.
    /// Writes nothing; the owner (the session manager) hears of it first and forgets the session.
    func endSignedOutElsewhere() {
        report(.signedOutElsewhere)
        finish(refreshError: SessionError(.sessionEnded, "the account was signed out in another process"))
    }

    /// Whether records written for this session hold the access token: when the app asked for it, or when the
    /// store is shared between processes (the others use the access token a refresh stored).
    var storesAccessToken: Bool {
        configuration.storesAccessToken || vault?.store.refreshLock != nil
    }

    /// Sets the handler that hears about refreshes, rejections and storage failures (the session manager).
    ///
    /// - Parameter handler: The handler, called on an arbitrary thread.
    func setEventHandler(_ handler: (@Sendable (SessionEvent) -> Void)?) {
        lifetime.withLock { $0.eventHandler = handler }
    }

    func report(_ event: SessionEvent) {
        let handler = lifetime.withLock { $0.isActive ? $0.eventHandler : nil }
        handler?(event)
    }

    /// Enqueues a write of the current tokens if the session is active.
    ///
    /// - Returns: The pending write, or `nil` when the session ended or has no vault.
    func persistTokens() -> Task<(any Error)?, Never>? {
        lifetime.withLock { lifetime in
            guard lifetime.isActive, !lifetime.credentialWritesSealed, let tokens = lifetime.tokens else { return nil }
            return vault?.enqueueSave(record(for: tokens, selectedAt: lifetime.selectedAt))
        }
    }

    func record(for tokens: TokenSet, selectedAt: Date?) -> CredentialRecord {
        var expiry: Date?
        let storesAccessToken = storesAccessToken
        if storesAccessToken, let lifetime = tokens.lifetime {
            expiry = tokens.receivedAtWall.addingTimeInterval(lifetime.timeInterval)
        }
        return CredentialRecord(
            account: account,
            refreshToken: tokens.refreshToken,
            accessToken: storesAccessToken ? tokens.accessToken : nil,
            accessTokenExpiresAt: expiry,
            idToken: storesAccessToken ? tokens.idToken : nil,
            scope: tokens.scope,
            tokenType: tokens.tokenType,
            savedAt: configuration.clock.wallNow,
            selectedAt: selectedAt
        )
    }
}

extension Duration {
    /// The duration in seconds, as Foundation's `TimeInterval`.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }

    /// The duration as a `URLSession` timeout.
    ///
    /// FoundationNetworking (Linux) arms its timeout timer with the interval truncated to whole seconds, so a
    /// timeout under one second fires at once and fails every request; there the interval is rounded up to whole
    /// seconds, which waits a little longer than asked rather than not at all.
    var urlSessionTimeout: TimeInterval {
        #if canImport(FoundationNetworking)
            return max(timeInterval.rounded(.up), 1)
        #else
            return timeInterval
        #endif
    }
}
