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
    /// holds. Lowering the phase also stops transfer starts (they check `isActive` last): one flag, not two.
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
        var phase = Phase.active
        /// Whether the session may still start work and commit results. Once `false`, it never becomes `true`.
        var isActive: Bool { phase == .active }
        /// The tokens the session held; set with ``hold(_:refreshedBy:)``, which derives the next two from them.
        var tokens: TokenSet?
        /// When `tokens`' access token starts to count as expiring: its expiry less the refresher's margin
        /// (``TokenRefresher/expiringFrom(_:)``), worked out once when the tokens are set so that the check before
        /// every request is one comparison; `nil` for a token without an expiry, or a session without a refresher.
        var expiringFrom: ContinuousClock.Instant?
        /// The access token and the `Authorization` value that carries it, built once when the tokens are set,
        /// not on every attempt.
        var credential: Credential?
        /// The one id allocator: requests, writes and end handlers all take their key from it, so no two ever share
        /// one, whatever their kind.
        var nextID = 0
        /// The `data(for:)` calls that have not returned: what `end()` answers and cancels.
        var requests: [Int: InFlightRequest] = [:]
        /// What runs at the end, by registration number (``addEndHandler(_:)``), so a handler can be removed.
        var endHandlers: [Int: @Sendable () -> Void] = [:]
        /// Who hears about refreshes, rejections and storage failures (the session manager).
        var eventHandler: (@Sendable (SessionEvent) -> Void)?
        /// The writes in flight, with their policies, for sign-out to wait for, hand off or discard.
        var writes: [Int: PendingWrite] = [:]
        /// The URLSession of handed-off writes, created on the first one; `end()` lets it finish.
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
        /// The last `DPoP-Nonce` each origin gave this session (RFC 9449 §9), for its next proof there.
        var dpopNonces: [Origin: String] = [:]
        /// Whether the store refused the write of rotated tokens this session holds (a locked device): until a write
        /// succeeds, the stored record holds a refresh token the server has retired, and a refresh in this process
        /// must store the session's tokens before it trusts the record.
        var unstoredRotation = false
        /// While a refused write of rotated tokens has not been made good: the refresh token the stored record still
        /// holds, one this session retired. The record is this session's all the same, and goes with it when its
        /// grant is rejected.
        var refreshTokenLeftInStore: String?
        /// Whether this process's refresher is deleting the record of a grant the server rejected: the record is then
        /// gone because of this session's own rejection, not because another process signed the account out.
        var deletingRejectedGrant = false

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

        @inline(__always)
        mutating func allocateID() -> Int {
            defer { nextID &+= 1 }
            return nextID
        }
    }
}

extension UserSession {
    /// Feeds the lifetime one event, in one critical section, and returns its answer for the caller to act on
    /// once the lock is released.
    @inline(__always)
    @discardableResult
    func lifetime(_ event: Lifetime.Event) -> Lifetime.Action {
        lifetime(event) { $0 }
    }

    /// Feeds the lifetime one event and acts on its answer before the lock is released: the one entry point of
    /// the session's lock.
    ///
    /// Only three kinds of effect may be performed inside, each because it must be in the same step as the decision
    /// that admitted it, and none waits for anything that takes this lock: enqueueing (a credential write or a
    /// deletion, so that the vault's order is the lifetime's: the last operation on an ended account's record is its
    /// deletion), creating a task on a URLSession the session keeps (so that `end()`, which takes this lock before
    /// it invalidates that URLSession, finds every task created on it), and creating a download's file (so that once
    /// `end()` has returned, and a sign-out purges the account's directory after it, no file of the account
    /// appears). Nothing is built here: a URLSession is made outside and offered back
    /// (``Lifetime/offerTransfers(_:)``).
    @inline(__always)
    func lifetime<Result>(
        _ event: Lifetime.Event, inside perform: (Lifetime.Action) throws -> Result
    ) rethrows -> Result {
        try lifetimeLock.withLock { lifetime in try perform(lifetime.handle(event)) }
    }
}

extension UserSession.Lifetime {
    /// What a URLSession the session makes on first use is, when asked for (``handoffSupply(nonceFor:)``,
    /// ``transferSupply(nonceFor:)``).
    enum Supply<Made> {
        /// Use this one, with the credential and the nonce to send (`nil` without a token).
        case use(Made, UserSession.Credential?, nonce: String?)
        /// None is made yet: make one outside the lock and offer it.
        case make
        /// The session has ended: make none.
        case ended
    }

    /// What became of a URLSession offered to the lifetime.
    enum Offer<Made> {
        /// It is the session's now.
        case kept
        /// Another was kept first (or the session ended, `nil`): invalidate the one offered, and use this one.
        case spare(Made?)
    }

    /// What happens to the lifetime: each case is one critical section of ``UserSession/lifetime(_:)``.
    enum Event {
        case isActive, tokens, requestCount, endHandlerCount, pendingWrites, selectedAt, eventHandler
        case storableTokens, rotation, sessions, seal, end
        case setEventHandler((@Sendable (SessionEvent) -> Void)?)
        /// The credential to send if the session is active, whether it is expiring at the instant (if given) and
        /// the nonce for the URL.
        case credential(at: ContinuousClock.Instant?, nonceFor: URL?)
        /// The tokens held if the session is active, and whether they are expiring at the instant.
        case held(at: ContinuousClock.Instant)
        case register(InFlightRequest)
        case forget(Int)
        case complete(Int?)
        case beginWrite(UserSession.PendingWrite)
        case endWrite(Int)
        case addEndHandler(@Sendable () -> Void)
        case removeEndHandler(Int)
        case handoff(nonceFor: URL?)
        case offerHandoff(URLSession)
        case transfers(nonceFor: URL?)
        case offerTransfers(TransferSession)
        case downloads(temporary: URL)
        case useDownloadsDirectory(URL?)
        case commitRefreshed(TokenSet, refreshedBy: TokenRefresher?)
        case adopt(TokenSet, refreshedBy: TokenRefresher?)
        case select(Date)
        case restoreSelection(Date?)
        case noteNonce(String, for: URL?)
        case rotationRefused(leaving: String)
        case stored(refreshToken: String?)
        case beginDeletingRejectedGrant
    }

    /// The lifetime's answer to an event.
    enum Action {
        case none
        case flag(Bool)
        case id(Int?)
        case count(Int)
        case tokens(TokenSet?)
        case credential(UserSession.Credential?, expiring: Bool, nonce: String?)
        case writes([UserSession.PendingWrite])
        case date(Date?)
        case eventHandler((@Sendable (SessionEvent) -> Void)?)
        case handoff(Supply<URLSession>)
        case transfers(Supply<TransferSession>)
        case offeredHandoff(Offer<URLSession>)
        case offeredTransfers(Offer<TransferSession>)
        /// The URLSessions made on first use, and whether the session is active (if not, `end()` took them).
        case sessions(active: Bool, handoff: URLSession?, transfers: TransferSession?)
        case directory(URL)
        /// Tokens now held, whether they may be stored, and the selection to store with them; `nil` tokens when
        /// the session had ended.
        case commit(TokenSet?, storable: Bool, selectedAt: Date?)
        /// The tokens to store (`nil` when none may be) and the selection to store with them.
        case storable(TokenSet?, selectedAt: Date?)
        case rotation(unstored: Bool, leftInStore: String?, deletingRejectedGrant: Bool)
        case ended(Ended?)
        /// Whether this seal was the first, or `nil` when the session had ended.
        case sealed(Bool?)
        /// The tokens held if the session is active, and whether they are expiring.
        case held(TokenSet?, expiring: Bool)

        var flag: Bool {
            if case .flag(let flag) = self { return flag }
            return false
        }
        var id: Int? {
            if case .id(let id) = self { return id }
            return nil
        }
        var tokens: TokenSet? {
            if case .tokens(let tokens) = self { return tokens }
            return nil
        }
        var date: Date? {
            if case .date(let date) = self { return date }
            return nil
        }
    }

    /// Performs `event`'s transition and returns what the caller must do.
    @inline(__always)
    mutating func handle(_ event: Event) -> Action {
        switch event {
        case .credential(let now, let url):
            guard isActive, let credential else { return .credential(nil, expiring: false, nonce: nil) }
            return .credential(
                credential, expiring: now.map(isExpiring(at:)) ?? false, nonce: nonce(for: url, of: credential))
        case .register(let request): return .id(register(request))
        case .complete(let id): return .flag(complete(id))
        case .forget(let id):
            forget(id)
            return .none
        case .isActive: return .flag(isActive)
        case .tokens: return .tokens(tokens)
        case .held(let now):
            guard isActive, let tokens else { return .held(nil, expiring: false) }
            return .held(tokens, expiring: isExpiring(at: now))
        case .requestCount: return .count(requestCount)
        case .endHandlerCount: return .count(endHandlerCount)
        case .pendingWrites: return .writes(pendingWrites)
        case .selectedAt: return .date(selectedAt)
        case .eventHandler: return .eventHandler(activeEventHandler)
        case .setEventHandler(let handler):
            setEventHandler(handler)
            return .none
        case .storableTokens: return .storable(storableTokens, selectedAt: selectedAt)
        case .rotation:
            return .rotation(
                unstored: unstoredRotation, leftInStore: refreshTokenLeftInStore,
                deletingRejectedGrant: deletingRejectedGrant)
        case .sessions: return .sessions(active: isActive, handoff: handoffSession, transfers: transfers)
        case .seal: return .sealed(sealCredentials())
        case .end: return .ended(end())
        case .beginWrite(let write): return .id(beginWrite(write))
        case .endWrite(let id):
            endWrite(id)
            return .none
        case .addEndHandler(let handler): return .id(addEndHandler(handler))
        case .removeEndHandler(let key):
            removeEndHandler(key)
            return .none
        case .handoff(let url): return .handoff(handoffSupply(nonceFor: url))
        case .offerHandoff(let made): return .offeredHandoff(offerHandoff(made))
        case .transfers(let url): return .transfers(transferSupply(nonceFor: url))
        case .offerTransfers(let made): return .offeredTransfers(offerTransfers(made))
        case .downloads(let temporary): return .directory(downloads { temporary })
        case .useDownloadsDirectory(let directory):
            useDownloadsDirectory(directory)
            return .none
        case .commitRefreshed(let tokens, let refresher):
            let committed = commitRefreshed(tokens, refreshedBy: refresher)
            return .commit(committed?.tokens, storable: committed?.storable ?? false, selectedAt: selectedAt)
        case .adopt(let tokens, let refresher):
            return .commit(
                adopt(tokens, refreshedBy: refresher) ? tokens : nil, storable: false, selectedAt: selectedAt)
        case .select(let date): return .tokens(select(at: date))
        case .restoreSelection(let date):
            restoreSelection(date)
            return .none
        case .noteNonce(let nonce, let url):
            noteNonce(nonce, for: url)
            return .none
        case .rotationRefused(let presented):
            rotationRefused(leaving: presented)
            return .none
        case .stored(let refreshToken):
            stored(refreshToken: refreshToken)
            return .none
        case .beginDeletingRejectedGrant:
            beginDeletingRejectedGrant()
            return .none
        }
    }
}

extension UserSession {
    /// Keeps a response's `DPoP-Nonce` for its origin (RFC 9449 §9), and says whether the response refused the
    /// proof for its nonce (`401` with `WWW-Authenticate: DPoP error="use_dpop_nonce"`) and gave a new one.
    func noteDPoPNonce(of response: HTTPURLResponse, for url: URL?) -> Bool {
        guard let nonce = response.value(forHTTPHeaderField: "DPoP-Nonce"), !nonce.isEmpty,
            url.flatMap(Origin.init) != nil
        else { return false }
        lifetime(.noteNonce(nonce, for: url))
        return response.statusCode == 401
            && DPoPProof.asksForNonce(response.value(forHTTPHeaderField: "WWW-Authenticate"))
    }
}

extension SessionError {
    /// What anything asked of a session after its end fails with.
    static var ended: SessionError { SessionError(.sessionEnded, "the session has ended") }
}

// What the lifetime registers for `end()`: declared beside it, so the session's room names no type of the rooms that
// build on it (the request kinds register these; the lifetime only holds and ends them).

/// A `data(for:)` call in flight, as the session's registry holds it: its task, for `end()` to cancel, and the
/// right to answer its caller, for `end()` to answer first.
struct InFlightRequest: Sendable, CarriesSessionTask {
    /// Its URLSession task, when it runs on the session's URLSession.
    let sessionTask: URLSessionTask?
    /// Its caller, on the URLSession route.
    var answer: TaskAnswer<DataCompletion>? = nil
    #if os(Linux)
        /// Its libcurl transfer, when it runs on the session's libcurl client.
        var transfer: CurlTransferHandle? = nil
        /// Its caller, on the libcurl route: answered with the answer as collected (``CurlAnswer``).
        var collected: TaskAnswer<CurlAnswer>? = nil
    #endif

    /// Answers the caller with `sessionEnded`, unless it was answered already.
    func answerEnded() {
        answer?.resume(throwing: SessionError.ended)
        #if os(Linux)
            collected?.resume(throwing: SessionError.ended)
        #endif
    }
}

/// What one data task's completion handler answers: the body, the response, and whether the cache may store it.
struct DataCompletion: Sendable {
    let data: Data
    let response: URLResponse
    let storable: Bool
}

extension UserSession {
    /// A write in flight, as the session's lifetime holds it for sign-out: its policy, and the signal it resolves
    /// when it returns.
    struct PendingWrite: Sendable {
        let policy: WritePolicy
        let done: Broadcast<Void>
    }
}
