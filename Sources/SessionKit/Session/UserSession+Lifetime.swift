import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// What a session holds while it lives, and the only place that decides whether it is still active.
    ///
    /// It lives in ``UserSession/lifetime``'s lock, and every change is one of its operations, each one step under
    /// that one lock: registering work checks the flag and takes an id from the one allocator in the same step, and
    /// ``end()`` lowers the flag and takes everything registered in the same step, so whatever was registered is
    /// among what `end()` cancels, and nothing is registered after. The operations only change the state and hand
    /// back what the caller must do; nothing here cancels a task, runs a handler or writes a file.
    struct Lifetime {
        /// What ``end()`` took from the session: what the caller cancels, runs and revokes once the lock is released.
        struct Ended {
            /// The `data(for:)` calls in flight, to answer with `sessionEnded` and cancel.
            let requests: [Int: InFlightRequest]
            /// The end handlers, by registration number: they run in that order.
            let handlers: [Int: @Sendable () -> Void]
            /// The hand-off writes' URLSession, to let finish and invalidate.
            let handoff: URLSession?
            /// The tokens the session held at the instant it ended: what a sign-out revokes.
            let tokens: TokenSet?
        }

        /// Whether the session may still start work and commit results. Once `false`, it never becomes `true`.
        private(set) var isActive = true
        /// The tokens the session held; set with ``hold(_:refreshedBy:)``, which derives the next two from them.
        private(set) var tokens: TokenSet?
        /// When `tokens`' access token starts to count as expiring: its expiry less the refresher's margin
        /// (``TokenRefresher/expiringFrom(_:)``), worked out once when the tokens are set so that the check before
        /// every request is one comparison; `nil` for a token without an expiry, or a session without a refresher.
        private var expiringFrom: ContinuousClock.Instant?
        /// The access token and the `Authorization` value that carries it, built once when the tokens are set,
        /// not on every attempt.
        private(set) var credential: Credential?
        /// The one id allocator: requests, writes and end handlers all take their key from it, so no two ever share
        /// one, whatever their kind.
        private var nextID = 0
        /// The `data(for:)` calls that have not returned: what `end()` answers and cancels.
        private var requests: [Int: InFlightRequest] = [:]
        /// What runs at the end, by registration number (``addEndHandler(_:)``), so a handler can be removed.
        private var endHandlers: [Int: @Sendable () -> Void] = [:]
        /// Who hears about refreshes, rejections and storage failures (the session manager).
        private var eventHandler: (@Sendable (SessionEvent) -> Void)?
        /// The writes in flight, with their policies, for sign-out to wait for, hand off or discard.
        private var writes: [Int: PendingWrite] = [:]
        /// The URLSession of handed-off writes, created on the first one; `end()` lets it finish.
        private(set) var handoffSession: URLSession?
        /// The URLSession of uploads, downloads, byte streams and WebSockets, created on the first one
        /// (`UserSession+Transfers.swift`); the end handler it registers cancels its tasks and invalidates it.
        private(set) var transfers: TransferSession?
        /// Where ``download(for:progress:)`` writes: set by the manager to the account's directory; `nil` for a
        /// private temporary directory created on the first download and removed when the session ends.
        private var downloadsDirectory: URL?
        /// Set when a sign-out has queued the deletion of the account's record: from then on refreshed tokens
        /// are kept in memory (for the session's last requests and for revocation) and never stored.
        private var credentialWritesSealed = false
        /// When the session last became the app's current one; stored with its record.
        private(set) var selectedAt: Date?

        // MARK: Tokens

        /// Holds `tokens`, with what every request needs from them worked out once: the instant their access token
        /// counts as expiring (by `refresher`'s margin; none without a refresher) and the `Authorization` value.
        mutating func hold(_ tokens: TokenSet?, refreshedBy refresher: TokenRefresher?) {
            self.tokens = tokens
            expiringFrom = tokens.flatMap { refresher?.expiringFrom($0) }
            credential = tokens.map(Credential.init(tokens:))
        }

        /// Whether the access token counts as expiring at `now`, and is refreshed before it is sent.
        @inline(__always)
        func isExpiring(at now: ContinuousClock.Instant) -> Bool {
            expiringFrom.map { now >= $0 } ?? false
        }

        /// Holds a refresh result if the session is active, keeping the refresh token it replaces when the result
        /// has none (RFC 6749 §6).
        ///
        /// - Returns: The tokens now held and whether they may be stored (no sign-out has sealed the record), or
        ///   `nil` when the session has ended (the result is dropped).
        mutating func commitRefreshed(
            _ refreshed: TokenSet, refreshedBy refresher: TokenRefresher?
        ) -> (tokens: TokenSet, storable: Bool)? {
            guard isActive else { return nil }
            var merged = refreshed
            if merged.refreshToken == nil { merged.refreshToken = tokens?.refreshToken }
            // A refresh answer may carry no ID token (OpenID Connect Core §12.2): the sign-in's stays the hint that
            // the provider's sign-out names the user by.
            if merged.idToken == nil { merged.idToken = tokens?.idToken }
            hold(merged, refreshedBy: refresher)
            return (merged, !credentialWritesSealed)
        }

        /// Holds tokens another process stored, if the session is active, keeping the ID token it holds when the
        /// record has none.
        ///
        /// - Returns: Whether the session was active (else the tokens are dropped).
        mutating func adopt(_ stored: TokenSet, refreshedBy refresher: TokenRefresher?) -> Bool {
            guard isActive else { return false }
            var adopted = stored
            // A record holds an ID token only with `storesIDToken`: the one this session signed in with stays the
            // hint the provider's sign-out names the user by.
            if adopted.idToken == nil { adopted.idToken = tokens?.idToken }
            hold(adopted, refreshedBy: refresher)
            return true
        }

        // MARK: Credential writes

        /// The tokens to store, or `nil` when none may be: the session ended, or a sign-out sealed its record.
        var storableTokens: TokenSet? {
            isActive && !credentialWritesSealed ? tokens : nil
        }

        /// Stops credential writes, if the session is active: from now on ``storableTokens`` is `nil` and refresh
        /// results are held, never stored.
        ///
        /// - Returns: `nil` when the session had ended; otherwise whether this call sealed them (`false`: a call
        ///   before did).
        mutating func sealCredentials() -> Bool? {
            guard isActive else { return nil }
            defer { credentialWritesSealed = true }
            return !credentialWritesSealed
        }

        /// Records that the session became the app's current one at `date`, if its record may still be written.
        ///
        /// - Returns: The tokens to store with the selection, or `nil` when nothing is written (nor recorded).
        mutating func select(at date: Date) -> TokenSet? {
            guard let tokens = storableTokens else { return nil }
            selectedAt = date
            return tokens
        }

        /// Takes the moment the session was last current from its stored record (at restore).
        mutating func restoreSelection(_ date: Date?) {
            selectedAt = date
        }

        // MARK: Requests

        /// Registers a `data(for:)` call in flight, if the session is active: `end()` answers and cancels it.
        ///
        /// - Returns: Its id, for ``forget(_:)`` or ``complete(_:)``; `nil` once the session has ended.
        @inline(__always)
        mutating func register(_ request: InFlightRequest) -> Int? {
            guard isActive else { return nil }
            let id = allocateID()
            requests[id] = request
            return id
        }

        /// Forgets a request that failed. Does nothing after `end()`, which took them all.
        @inline(__always)
        mutating func forget(_ id: Int) {
            requests.removeValue(forKey: id)
        }

        /// Forgets a request that was answered, and tells whether the answer may be handed over.
        ///
        /// - Returns: Whether the session is still active: an answer that arrives after `end()` is never handed over.
        @inline(__always)
        mutating func complete(_ id: Int?) -> Bool {
            if let id { requests.removeValue(forKey: id) }
            return isActive
        }

        /// The number of `data(for:)` calls in flight.
        var requestCount: Int { requests.count }

        // MARK: Writes

        /// Registers a write in flight with its policy, if the session is active.
        ///
        /// - Returns: Its id, for ``endWrite(_:)``; `nil` once the session has ended.
        mutating func beginWrite(_ write: PendingWrite) -> Int? {
            guard isActive else { return nil }
            let id = allocateID()
            writes[id] = write
            return id
        }

        /// Forgets a write that returned.
        mutating func endWrite(_ id: Int) {
            writes.removeValue(forKey: id)
        }

        /// The writes in flight now.
        var pendingWrites: [PendingWrite] { Array(writes.values) }

        /// The hand-off writes' URLSession, made by `make` on first use, or `nil` once the session has ended (or
        /// holds no token to send).
        mutating func handoff(orMake make: () -> URLSession) -> (session: URLSession, accessToken: String)? {
            guard isActive, let token = tokens?.accessToken else { return nil }
            if let handoffSession { return (handoffSession, token) }
            let session = make()
            handoffSession = session
            return (session, token)
        }

        // MARK: Transfers

        /// The transfer URLSession, made by `make` on first use with the end handler that ends its tasks, or `nil`
        /// once the session has ended: whoever sees the session active sees the handler registered.
        mutating func transferSession(orMake make: () -> TransferSession) -> TransferSession? {
            guard isActive else { return nil }
            if let transfers { return transfers }
            let made = make()
            transfers = made
            endHandlers[allocateID()] = { made.endAll() }
            return made
        }

        /// Where downloads go: the directory set with ``useDownloadsDirectory(_:)``, else `temporary()`, made on
        /// first use and removed at the end (a session without a manager has no account directory to be purged
        /// with).
        mutating func downloads(orTemporary temporary: () -> URL) -> URL {
            if let downloadsDirectory { return downloadsDirectory }
            let directory = temporary()
            downloadsDirectory = directory
            if isActive { endHandlers[allocateID()] = { try? FileManager.default.removeItem(at: directory) } }
            return directory
        }

        /// Sets where downloads go (the account's directory, for a session a manager made).
        mutating func useDownloadsDirectory(_ directory: URL?) {
            downloadsDirectory = directory
        }

        // MARK: The end

        /// Registers what runs at the end, if the session is active.
        ///
        /// - Returns: Its key, for ``removeEndHandler(_:)``; `nil` once the session has ended (the caller runs it).
        mutating func addEndHandler(_ handler: @escaping @Sendable () -> Void) -> Int? {
            guard isActive else { return nil }
            let key = allocateID()
            endHandlers[key] = handler
            return key
        }

        /// Forgets an end handler. Does nothing if it ran or was removed already.
        mutating func removeEndHandler(_ key: Int) {
            endHandlers.removeValue(forKey: key)
        }

        /// How many end handlers are registered.
        var endHandlerCount: Int { endHandlers.count }

        /// Sets who hears about the session's events.
        mutating func setEventHandler(_ handler: (@Sendable (SessionEvent) -> Void)?) {
            eventHandler = handler
        }

        /// Who hears about the session's events, or `nil` once it has ended: an ended session reports nothing.
        var activeEventHandler: (@Sendable (SessionEvent) -> Void)? { isActive ? eventHandler : nil }

        /// Ends the session: lowers ``isActive`` for good, forgets the tokens, and takes everything registered.
        ///
        /// - Returns: What the caller answers, cancels, runs and revokes once the lock is released, or `nil` if the
        ///   session had already ended.
        mutating func end() -> Ended? {
            guard isActive else { return nil }
            isActive = false
            let ended = Ended(requests: requests, handlers: endHandlers, handoff: handoffSession, tokens: tokens)
            hold(nil, refreshedBy: nil)
            // Moved out whole, not copied: ending costs the same whatever is in flight.
            requests = [:]
            endHandlers = [:]
            return ended
        }

        @inline(__always)
        private mutating func allocateID() -> Int {
            defer { nextID &+= 1 }
            return nextID
        }
    }

    /// An access token and the `Authorization` header value that sends it: worked out once when the session holds
    /// its tokens (``Lifetime/hold(_:refreshedBy:)``), read by every request.
    struct Credential {
        let token: String
        let authorization: String
        /// The DPoP key every request with the token carries a proof of, if the token is bound.
        let proofKey: DPoPKey?
        /// The proofs' `ath` for this token (RFC 9449 §4.2), when it is bound: the same for every proof.
        let proofTokenHash: String?

        init(tokens: TokenSet) {
            token = tokens.accessToken
            proofKey = tokens.proofKey
            proofTokenHash = tokens.proofKey == nil ? nil : DPoPProof.tokenHash(tokens.accessToken)
            authorization = (tokens.proofKey == nil ? "Bearer " : "DPoP ") + tokens.accessToken
        }
    }
}
