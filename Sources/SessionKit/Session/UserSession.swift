import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One signed-in account's session: the object whose lifetime bounds every request, cache entry and
/// credential made on that account's behalf.
///
/// Every request goes through the session and carries this session's token, never "the current token".
/// ``end()`` flips ``isActive`` once and for all, cancels every request in flight, invalidates the session's
/// own `URLSession` (on Linux's default transport, closes its own libcurl client), drops its cache and cookies and
/// forgets its tokens. After that, the session starts no request and stores no credential: a request is refused
/// with ``SessionError/Code/sessionEnded``.
///
/// A re-login of the same account creates a new session object: compare sessions by identity (`===`), never by
/// account, when deciding whether a result may be committed.
///
/// - Important: Task creation and the flip of ``isActive`` happen under one lock, so no task is ever created
///   on an invalidated `URLSession` (a fatal error on Linux), and every task created before ``end()`` is among
///   those it cancels.
public final class UserSession: Sendable, Identifiable, CustomStringConvertible {
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
    /// What the session's data requests, uploads, downloads and handed-off writes are sent on: one of the two, made
    /// with the session, so that a session on libcurl holds no `URLSession` (nor its multi handle's two descriptors)
    /// and makes one only for a WebSocket (``TransferSession``).
    let route: DataRoute
    /// The session's cookies, one jar whichever transport sends a request; emptied by `end()`.
    let cookies: HTTPCookieStorage?
    let vault: CredentialVault?
    let ledger: WriteLedger?
    let refresher: TokenRefresher?
    /// The provider the session signed in through, stored with its record so that every later refresh and
    /// revocation of the account goes to that provider's client; `nil` for the manager's default provider, and for
    /// a session made outside a manager.
    public let provider: Provider.ID?
    /// The `sid` the account's record held when the session was restored from it (a record holds no ID token unless
    /// asked to): the provider session this one continues.
    let restoredProviderSessionID: String?
    /// How sign-out revokes this session's tokens: its provider's revoker.
    let revoker: (any TokenRevoker)?
    /// Whether the session is active, its tokens, and everything `end()` ends, with the rest of what the session
    /// holds (its DPoP nonces, a refused rotation): one value (``Lifetime``) under one lock, read and changed only
    /// through ``lifetime(_:)``, one event per critical section. Lowering its phase is also what stops transfer
    /// starts: a start that reads it active resumes its task, and `end()` cancels that task like every other it took,
    /// whether the resume lands before or after the cancellation (a cancelled task never starts); no start holds the
    /// lock across `resume()`, so `end()` never waits for starts under way.
    let lifetimeLock: Lock<Lifetime>
    /// Whether the data URLSession may still create tasks: held for reading while `data(for:)` creates one, lowered
    /// (held for writing) just before the URLSession is invalidated (FoundationNetworking stops the process when a
    /// task is created on an invalidated session), on the queue that invalidates it, so that `end()` never waits for a
    /// creation under way. Not the lifetime lock: creating a task waits for FoundationNetworking's work queue, and
    /// every request's token check, registration and forgetting would wait with it. Shared, not exclusive: concurrent
    /// requests create their tasks at once, each waiting only for that queue, as a bare URLSession's callers do; with
    /// a mutex each would wait for every creation before its own too (BENCHMARKS.md, `request.ratio.concurrent8`).
    let creation = SharedLock(true)
    /// Creates an active session for `account` holding `tokens`.
    ///
    /// Apps usually let ``SessionManager`` create sessions (``SessionManager/signIn(_:tokens:through:makeCurrent:)``), so
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
        ledger: WriteLedger? = nil,
        provider: Provider.ID? = nil,
        revoker: (any TokenRevoker)? = nil,
        providerSessionID: String? = nil
    ) {
        self.serial = .next()
        self.restoredProviderSessionID = providerSessionID
        self.provider = provider
        self.revoker = revoker
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
        self.lifetimeLock = Lock(lifetime)

        // Ephemeral: its own cookie and credential storage, nothing on disk. Foundation's URLCache is off:
        // the session's ResponseCache is the only cache, and it is this session's alone.
        let urlConfiguration = URLSessionConfiguration.ephemeral
        urlConfiguration.urlCache = nil
        urlConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        urlConfiguration.httpShouldSetCookies = true
        urlConfiguration.timeoutIntervalForRequest = configuration.requestTimeout.urlSessionTimeout
        urlConfiguration.httpMaximumConnectionsPerHost = 64
        self.cookies = urlConfiguration.httpCookieStorage
        self.route = DataRoute(configuration: urlConfiguration, transport: configuration.transport)
    }

    /// Whether the session may still start work and commit results. Once `false`, it never becomes `true`.
    public var isActive: Bool { lifetime(.isActive).flag }

    /// The tokens the session holds now, or `nil` once it has ended.
    ///
    /// For inspection and tests. Requests get their token from the session when they are sent; copying this
    /// value into a request of your own would send it after a refresh replaced it, or after the session ended.
    public var tokens: TokenSet? { lifetime(.tokens).tokens }

    /// The user's session at the provider this session belongs to: the `sid` of the ID token it holds (the one it
    /// signed in with, or a refresh's), else the one its record held when it was restored; `nil` when neither had
    /// one, and once the session has ended. A back-channel logout naming it ends this session
    /// (``SessionManager/receiveBackChannelLogout(_:from:)``).
    public var providerSessionID: String? {
        guard let tokens else { return nil }
        return tokens.idToken.flatMap(JWT.sessionID(of:)) ?? restoredProviderSessionID
    }

    /// The number of requests in flight.
    package var requestsInFlight: Int {
        guard case .count(let count) = lifetime(.requestCount) else { return 0 }
        return count
    }

    /// The account and the session's identity.
    public var description: String { "UserSession(\(serial), \(account))" }

    deinit {
        // Dropped without `end()`: nothing can use the URLSession any more (a request in flight keeps its session
        // alive), but it would keep its connections and, on Linux, the two descriptors of its libcurl multi
        // handle for the rest of the process (a libcurl client frees its share handle as it goes). Its tasks' handlers hold this session weakly, so nothing else does.
        guard case .sessions(true, let handoff, let transfers) = lifetime(.sessions) else { return }  // `end()` did.
        urlSession?.finishTasksAndInvalidate()
        handoff?.finishTasksAndInvalidate()
        transfers?.urlSession.finishTasksAndInvalidate()
    }

    /// Ends the session: flips ``isActive`` once, cancels every request in flight, invalidates the
    /// `URLSession` (or closes the libcurl client), drops the cache and cookies, forgets the tokens and stops the
    /// refresher.
    ///
    /// Idempotent: only the first call does anything. It returns without waiting for the cancelled requests;
    /// each `data(for:)` call in flight throws ``SessionError/Code/sessionEnded`` at once, on a background queue,
    /// before FoundationNetworking has stopped its transfer (which, with many in flight on Linux, can take seconds).
    /// Its duration does not grow with the number of requests in flight: the URLSession calls that stop their
    /// transfers run on that background queue too.
    ///
    /// - Important: Once `end()` returns, the session starts no request (one that had not passed its start when
    ///   `end()` flipped ``isActive`` never will; one whose start was under way at that instant is cancelled with
    ///   the others, whichever of its start and its cancellation URLSession sees first), hands over no response,
    ///   and admits no credential write. `end()` never waits for a start under way.
    ///
    /// The account stays signed in: its record is kept (sign out with ``SessionManager/signOut(_:options:)``). So a
    /// refresh whose token request is already on its way is not cancelled, since the server may have rotated the
    /// refresh token the record holds: it runs on, released from the session, and writes the rotation to the record
    /// if the record still holds the refresh token it presented. Nothing of it reaches this session; its callers
    /// get ``SessionError/Code/sessionEnded`` at once.
    public func end() {
        finish(keepingRecord: true)
    }

    /// Ends the session, running `whileEnding` at the moment it stops admitting credential writes.
    ///
    /// `end()` is this with no arguments; the sign-out, and tests that count what `end()` cancelled, call it
    /// directly.
    ///
    /// - Parameters:
    ///   - refreshError: What a refresh in flight fails with; `nil` for `sessionEnded`.
    ///   - keepingRecord: Whether the account's record outlives the session (``end()``): a refresh whose token
    ///     request is on its way then runs on and stores the rotation in the record, instead of being cancelled.
    ///     `false` (a sign-out, an account signed out elsewhere, a record replaced) cancels it.
    ///   - whileEnding: Called once, under the lock that admits credential writes, with the refresh token the
    ///     session holds and the one a refused rotation left in the store (if any), just before the session stops
    ///     being active: a deletion it enqueues runs behind every write the session admitted, and is already queued
    ///     when anyone can see the session has ended. It must only enqueue work. Not called if the session had
    ///     already ended.
    /// - Returns: How many requests were cancelled and the tokens the session held, or `nil` if the session had
    ///   already ended.
    @discardableResult
    package func finish(
        refreshError: SessionError? = nil,
        keepingRecord: Bool = false,
        whileEnding: ((_ refreshToken: String?, _ leftInStore: String?) -> Void)? = nil
    ) -> Ending? {
        let ended = lifetime(.end) { action -> Lifetime.Ended? in
            guard case .ended(let ended?) = action else { return nil }
            whileEnding?(ended.tokens?.refreshToken, ended.refreshTokenLeftInStore)
            return ended
        }
        // Nothing can create a task any more (the phase is `ended`), and from here no start that has not checked yet
        // resumes its task: it answers it as cancelled. A start that checked before is cancelled below with every
        // other request `end()` took, without waiting for it.
        guard let ended else { return nil }
        // Cancelling URLSession tasks waits for the session's work queue once per task, behind the cancellations
        // before it, so with many requests in flight it takes seconds or more on Linux. It runs on another queue
        // (the session's `endings` on Linux, its delegate queue elsewhere), so ending a session takes the same short
        // time whatever is in flight. On that queue, before any cancellation, every caller is answered
        // with `sessionEnded`: callers learn of the end without waiting for FoundationNetworking to stop their
        // transfers. A response that still arrives meanwhile is dropped: the call was answered already, and
        // `data(for:)` checks `isActive` after every answer anyway.
        let requests = ended.requests
        #if os(Linux)
            if let curl {
                // Answered first, as on the URLSession route; then every transfer fails at once, on the loop.
                for request in requests.values { request.answerEnded() }
                curl.close()
            }
        #endif
        // A session on libcurl has no URLSession: every request it registers is a transfer, answered above.
        urlSession?.cancelWithoutRacingCompletion(
            requests.values, thenInvalidate: true, closing: creation,
            first: { for request in requests.values { request.answerEnded() } })
        // Handed-off writes finish on their own session; it accepts no new task from now on.
        ended.handoff?.finishTasksAndInvalidate()
        cookies?.removeCookies(since: .distantPast)
        cache.removeAll()
        refresher?.sessionEnded(with: refreshError ?? .endedDuringRefresh, keepingRecordOf: keepingRecord ? self : nil)
        for key in ended.handlers.keys.sorted() { ended.handlers[key]?() }
        return Ending(cancelledRequests: ended.requests.count, tokens: ended.tokens)
    }

    /// What `finish` found when it ended the session.
    package struct Ending {
        /// How many requests were in flight and cancelled.
        package let cancelledRequests: Int
        /// The tokens the session held at the instant it ended: what a sign-out revokes.
        let tokens: TokenSet?
    }

    /// Ends the session because another process signed its account out: its record is gone from the shared store.
    /// Writes nothing; the owner (the session manager) hears of it first and forgets the session.
    func endSignedOutElsewhere() {
        report(.signedOutElsewhere)
        finish(refreshError: SessionError(.sessionEnded, "the account was signed out in another process"))
    }

    /// Sets the handler that hears about refreshes, rejections and storage failures (the session manager).
    ///
    /// - Parameter handler: The handler, called on an arbitrary thread.
    func setEventHandler(_ handler: (@Sendable (SessionEvent) -> Void)?) {
        lifetime(.setEventHandler(handler))
    }

    /// Tells the event handler about `event`, if the session is active; called outside the lifetime lock.
    func report(_ event: SessionEvent) {
        guard case .eventHandler(let handler?) = lifetime(.eventHandler) else { return }
        handler(event)
    }
}

extension UserSession {
    /// The session's `URLSession`, or `nil` when its requests run on libcurl.
    var urlSession: URLSession? {
        guard case .urlSession(let urlSession) = route else { return nil }
        return urlSession
    }

    #if os(Linux)
        /// The session's libcurl client, when its requests run on libcurl: `end()` closes it.
        var curl: CurlClient? {
            guard case .curl(let curl) = route else { return nil }
            return curl
        }
    #endif
}
