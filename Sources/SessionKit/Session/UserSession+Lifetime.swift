import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// What a session holds while it lives, and the only place that decides whether it is still active: a value
    /// that decides, kept by ``UserSession`` in one lock and fed one event per critical section
    /// (``UserSession/lifetime(_:)``, `UserSession+LifetimeEvents.swift`).
    ///
    /// Pure: no lock, no task, no clock read, no I/O. Registering work checks the phase and takes an id from the one
    /// allocator in the same step, and ``end()`` moves to `ended` and takes everything registered in the same step,
    /// so whatever was registered is among what `end()` cancels, and nothing is registered after. Nothing is built
    /// here: a URLSession the session needs on first use (the hand-off writes', the transfers') is asked for as an
    /// action (`.make`), built by the shell with no lock held, and offered back; the first offer is kept, a later
    /// one (a racer lost) or one after the end is handed back to be invalidated.
    ///
    /// | Phase  | Event                                   | Action                                  | New phase |
    /// |--------|-----------------------------------------|-----------------------------------------|-----------|
    /// | active | `register`, `beginWrite`, `addEndHandler` | `.id(n)` (one allocator)              | active    |
    /// | ended  | `register`, `beginWrite`, `addEndHandler` | `.id(nil)` (refused; a handler runs now) | ended    |
    /// | any    | `forget(n)`, `endWrite(n)`, `removeEndHandler(n)` | `.none`                       | unchanged |
    /// | any    | `complete(n)`                           | `.flag(phase is active)`                | unchanged |
    /// | active | `credential(at:)`                       | `.credential(held, expiring, nonce)`    | active    |
    /// | ended  | `credential(at:)`                       | `.credential(nil)`                      | ended     |
    /// | active | `commitRefreshed(t)`, `adopt(t)`        | `.commit(merged, storable)`             | active    |
    /// | ended  | `commitRefreshed(t)`, `adopt(t)`        | `.commit(nil)` (dropped)                | ended     |
    /// | active | `seal`                                  | `.flag(first seal)`; writes sealed      | active    |
    /// | active | `transfers`/`handoff`, none made        | `.supply(.make)`                        | active    |
    /// | active | `transfers`/`handoff`, one made         | `.supply(.use(it, token, nonce))`       | active    |
    /// | ended  | `transfers`/`handoff`                   | `.supply(.ended)`                       | ended     |
    /// | active | `offer(s)`, none made                   | `.offer(.kept)`, transfers: end handler | active    |
    /// | active | `offer(s)`, one made                    | `.offer(.spare(existing))`: invalidate s | active   |
    /// | ended  | `offer(s)`                              | `.offer(.spare(nil))`: invalidate s     | ended     |
    /// | active | `end`                                   | `.ended(everything registered, tokens)` | ended     |
    /// | ended  | `end`                                   | `.ended(nil)`                           | ended     |
    ///
    /// What is not tied to the phase (the DPoP nonces, the record of a refused rotation, the deletion of a rejected
    /// grant, the selection date) is plain state that the same lock keeps, so that a session has one lock for all it
    /// holds. Lowering the phase also stops transfer starts (``UserSession/admitsStarts``): one flag, not two.
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
            /// The refresh token a refused rotation left in the store, if one did: the record is the session's too.
            let refreshTokenLeftInStore: String?
        }

        /// The lifetime's two phases: `active` until ``end()``, `ended` for good.
        enum Phase { case active, ended }

        /// The phase; it only ever moves from `active` to `ended`.
        private(set) var phase = Phase.active
        /// Whether the session may still start work and commit results. Once `false`, it never becomes `true`.
        var isActive: Bool { phase == .active }
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
        /// The last `DPoP-Nonce` each origin gave this session (RFC 9449 §9), for its next proof there.
        private var dpopNonces: [Origin: String] = [:]
        /// Whether the store refused the write of rotated tokens this session holds (a locked device): until a write
        /// succeeds, the stored record holds a refresh token the server has retired, and a refresh in this process
        /// must store the session's tokens before it trusts the record.
        private(set) var unstoredRotation = false
        /// While a refused write of rotated tokens has not been made good: the refresh token the stored record still
        /// holds, one this session retired. The record is this session's all the same, and goes with it when its
        /// grant is rejected.
        private(set) var refreshTokenLeftInStore: String?
        /// Whether this process's refresher is deleting the record of a grant the server rejected: the record is then
        /// gone because of this session's own rejection, not because another process signed the account out.
        private(set) var deletingRejectedGrant = false

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

        /// The hand-off writes' URLSession with the token and the nonce for `url`, `.make` when none is made yet, or
        /// `.ended` once the session has ended (or holds no token to send).
        func handoffSupply(nonceFor url: URL?) -> Supply<URLSession> {
            guard isActive, let credential else { return .ended }
            guard let handoffSession else { return .make }
            return .use(handoffSession, credential, nonce: nonce(for: url, of: credential))
        }

        /// Keeps `made` as the hand-off writes' URLSession if none is kept yet and the session is active.
        ///
        /// - Returns: `.kept`, or `.spare(existing)`: `made` lost a race (or came after the end, `existing` `nil`) and
        ///   the caller invalidates it; nothing ever holds it.
        mutating func offerHandoff(_ made: URLSession) -> Offer<URLSession> {
            guard isActive else { return .spare(nil) }
            if let handoffSession { return .spare(handoffSession) }
            handoffSession = made
            return .kept
        }

        // MARK: Transfers

        /// The transfer URLSession with the token and the nonce for `url`, `.make` when none is made yet, or `.ended`
        /// once the session has ended.
        func transferSupply(nonceFor url: URL?) -> Supply<TransferSession> {
            guard isActive else { return .ended }
            guard let transfers else { return .make }
            return .use(transfers, credential, nonce: credential.flatMap { nonce(for: url, of: $0) })
        }

        /// Keeps `made` as the transfer URLSession, with the end handler that ends its tasks, if none is kept yet and
        /// the session is active: whoever sees the session active and the session kept sees the handler registered.
        ///
        /// - Returns: `.kept`, or `.spare(existing)`: the caller invalidates `made`, which no task was created on.
        mutating func offerTransfers(_ made: TransferSession) -> Offer<TransferSession> {
            guard isActive else { return .spare(nil) }
            if let transfers { return .spare(transfers) }
            transfers = made
            endHandlers[allocateID()] = { made.endAll() }
            return .kept
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
            phase = .ended
            let ended = Ended(
                requests: requests, handlers: endHandlers, handoff: handoffSession, tokens: tokens,
                refreshTokenLeftInStore: refreshTokenLeftInStore)
            hold(nil, refreshedBy: nil)
            // Moved out whole, not copied: ending costs the same whatever is in flight.
            requests = [:]
            endHandlers = [:]
            return ended
        }

        // MARK: DPoP nonces

        /// The nonce to put in a proof for `url`, when the token is bound and the URL's origin gave one. Most servers
        /// never send a nonce: then the URL's origin is not worked out.
        func nonce(for url: URL?, of credential: Credential) -> String? {
            guard credential.proofKey != nil, !dpopNonces.isEmpty, let origin = url.flatMap(Origin.init) else {
                return nil
            }
            return dpopNonces[origin]
        }

        /// Keeps `nonce` for `url`'s origin.
        mutating func noteNonce(_ nonce: String, for url: URL?) {
            guard let origin = url.flatMap(Origin.init) else { return }
            dpopNonces[origin] = nonce
        }

        // MARK: Refused rotations

        /// The store refused the write of rotated tokens; `presented` is the refresh token the record still holds.
        mutating func rotationRefused(leaving presented: String) {
            unstoredRotation = true
            refreshTokenLeftInStore = refreshTokenLeftInStore ?? presented
        }

        /// The store now holds `refreshToken` for this session (`nil`: the tokens the session holds): nothing is left
        /// behind if it is the session's current one; otherwise it is the retired token the record holds.
        mutating func stored(refreshToken: String?) {
            if let refreshToken, tokens?.refreshToken != refreshToken {
                refreshTokenLeftInStore = refreshToken
            } else {
                unstoredRotation = false
                refreshTokenLeftInStore = nil
            }
        }

        /// This process's refresher is about to delete the record of a grant the server rejected.
        mutating func beginDeletingRejectedGrant() {
            deletingRejectedGrant = true
        }

        @inline(__always)
        private mutating func allocateID() -> Int {
            defer { nextID &+= 1 }
            return nextID
        }
    }
}
