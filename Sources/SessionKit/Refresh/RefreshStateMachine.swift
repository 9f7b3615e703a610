import SessionKitOAuth

/// The token refresher's decisions, as a value: which refresh runs, who waits for it, when a refresh is refused.
///
/// Pure: no lock, no task, no clock, no I/O. Time comes in as an argument, and so do the tokens the session holds,
/// which ``TokenRefresher`` reads inside the same critical section as the event they go with. Each event returns
/// the action to perform; the refresher performs it after the lock is released (a flight's task is the one
/// effect created inside it, so that the flight is reachable for as long as it runs).
///
/// `Handle` is what the refresher keeps of a flight (its task and its result); the machine stores it and hands it
/// back, and never looks inside.
///
/// | State               | Event                            | Action                       | New state             |
/// |---------------------|----------------------------------|------------------------------|-----------------------|
/// | ended, or no tokens | `need(any)`                      | `.fail(sessionEnded)`        | unchanged             |
/// | any                 | `need(.rejected(a))`, held ≠ a   | `.use(held)`                 | unchanged             |
/// | flight F            | `need(any)`, not answered above  | `.join(F)`                   | unchanged             |
/// | idle                | `need(.proactive)`, not expiring | `.use(held)`                 | unchanged             |
/// | idle, guard full    | `need`, counting                 | `.fail(excessiveRefresh)`    | history pruned        |
/// | idle                | `need`, no refresh token         | `.fail(accessExpired)`       | history pruned        |
/// | idle                | `need`, otherwise                | `.start(F, held refresh)`    | F (+ now if counting) |
/// | flight F, no handle | `launched(F, h)`                 | `true`                       | F with handle h       |
/// | other               | `launched(G, h)`                 | `false`                      | unchanged             |
/// | flight F            | `flightSettled(F, outcome, s)`   | `true` (report it)           | F, settled; a failure |
/// |                     |                                  |                              | not sent (`!s`) leaves|
/// |                     |                                  |                              | the history           |
/// | other               | `flightSettled(G, outcome)`      | `false`                      | unchanged             |
/// | flight F            | `flightFinished(F)`              | `true`                       | idle                  |
/// | other               | `flightFinished(G)`              | `false`                      | unchanged             |
/// | flight F            | `sending(F)`                     | `true` (send the request)    | F, sending            |
/// | ended, or other     | `sending(G)`                     | `false` (send nothing)       | unchanged             |
/// | flight F, handle h  | `sessionEnded(e)`                | `.cancel(h, own error ?? e)` | ended, idle           |
/// | F sending, handle h | `sessionEnded(e, keepingRecord)` | `.release(h, e)`             | ended, idle, F released |
/// | idle or ended       | `sessionEnded(e)`                | `.none`                      | ended, idle           |
///
/// "Held" is the session's access token, "held refresh" its refresh token; "own error" is the flight's failure
/// once settled with one. "Counting" is ``countsAgainstLoopGuard(_:reason:)``: every refresh counts but a proactive
/// one of a token that lives at least `2 × window / maximumRefreshes`, which starts whatever the history holds. A
/// need that finds a flight without a handle is a programmer error (the refresher launches a flight in the critical
/// section that started it). "Sending" is a flight whose token request is on its way (``sending(_:)`` said so):
/// the server may have rotated the refresh token already, so a session that ends keeping its record
/// (``UserSession/end()``) releases such a flight instead of cancelling it, and it stores the rotation in the record.
///
/// What a refresh does once it holds the shared store's cross-process lock is a function of what it read,
/// ``storedRecordRead(_:presenting:holding:at:)`` (no state, no event). "Another" is a refresh token other than the
/// flight's; "held" the access token the session holds:
///
/// | Stored record                                     | Action                         |
/// |---------------------------------------------------|--------------------------------|
/// | none                                              | `.signedOutElsewhere`          |
/// | no refresh token, or the flight's                 | `.present(the flight's)`       |
/// | another, its access token has time left, not held | `.adopt(stored tokens)`        |
/// | another, its access token expired, absent or held | `.present(the stored, newest)` |
///
/// What a flight does once it runs (the cross-process lock, an unstored rotation, retries, a rejected grant's
/// record) is ``Exchange``'s, a value of its own with its own table; the proactive margin is ``margin(lifetime:leeway:jitter:offset:)``.
///
/// - Important: A flight commits its tokens to the session before the machine hears ``flightFinished(_:)``, and a
///   need reads the session's tokens inside the machine's critical section: a need either finds the flight (and
///   joins it) or finds its tokens. It can never hold the refresh token a flight has just presented and find no
///   flight, which would make a caller present that token again (RFC 9700 §4.14.2: reuse revokes the grant).
struct RefreshStateMachine<Handle: Sendable>: Sendable {
    /// One flight's number, unique within its machine.
    struct FlightID: Hashable, Sendable, CustomStringConvertible {
        let rawValue: UInt64
        var description: String { "flight-\(rawValue)" }
    }

    /// Why a refresh is needed.
    enum Reason: Equatable, Sendable {
        /// The access token is within its margin of expiring (a request is about to send it).
        case proactive
        /// A request carrying `accessToken` was answered 401.
        case rejected(accessToken: String)
        /// The app asked for a refresh, whatever the expiry.
        case forced
    }

    /// What the session holds at the instant of the need.
    struct Held: Sendable {
        /// Its tokens.
        let tokens: TokenSet
        /// Whether its access token counts as expiring now (`UserSession.Lifetime.isExpiring(at:)`).
        let expiring: Bool
    }

    /// What to do about a need.
    enum NeedAction: Sendable {
        /// Send this access token: it is fresh, or it replaced the one that was rejected.
        case use(accessToken: String)
        /// Wait for the flight in progress.
        case join(FlightID, Handle)
        /// Start a flight presenting this refresh token, then tell the machine with ``launched(_:handle:)``.
        case start(FlightID, refreshToken: String)
        /// Refuse.
        case fail(SessionError)
    }

    /// What to do when the session ends.
    enum EndAction: Sendable {
        /// Cancel the flight's task and resolve its waiters with this error.
        case cancel(Handle, SessionError)
        /// Resolve the flight's waiters with this error and let its task run on: its token request is out, and the
        /// rotation it brings belongs in the record the ending kept (``isReleased(_:)`` tells the task so).
        case release(Handle, SessionError)
        /// Nothing was in flight.
        case none
    }

    /// What a refresh does after reading the shared store's record under the cross-process lock.
    enum StoredRecordAction: Equatable, Sendable {
        /// The record is gone: another process signed the account out. End the session; present nothing.
        case signedOutElsewhere
        /// Another process refreshed and its access token has time left: hold its tokens; present nothing.
        case adopt(TokenSet)
        /// Present this refresh token: the one in hand, or the newest another process stored.
        case present(refreshToken: String)
    }

    private struct Flight {
        let id: FlightID
        let refreshToken: String
        var handle: Handle?
        var outcome: Result<String, SessionError>?
        /// When it entered the loop guard's history; `nil` when it does not count.
        var countedAt: ContinuousClock.Instant?
        /// Whether its token request is on its way (``sending(_:)``).
        var isSending = false
    }

    /// The loop guard's count.
    let maximumRefreshes: Int
    /// The loop guard's sliding window.
    let window: Duration
    private var flight: Flight?
    private var lastID: UInt64 = 0
    /// Whether the session ended; from then on every need fails.
    private(set) var hasEnded = false
    /// The flight an ending that kept the record released (``sessionEnded(with:keepingRecord:)``).
    private var released: FlightID?
    /// When the refreshes that count against the loop guard started, oldest first (pruned at each need).
    private(set) var history: [ContinuousClock.Instant] = []

    /// Creates an idle machine.
    ///
    /// - Parameters:
    ///   - maximumRefreshes: At most this many counting refreshes within `window`.
    ///   - window: The loop guard's window.
    init(maximumRefreshes: Int, window: Duration) {
        self.maximumRefreshes = maximumRefreshes
        self.window = window
    }

    /// The flight in progress: its number and the refresh token it presents.
    var flightInProgress: (id: FlightID, refreshToken: String)? { flight.map { ($0.id, $0.refreshToken) } }

    /// The handle of the flight in progress.
    var flightHandle: Handle? { flight?.handle }

    /// A refresh is needed.
    ///
    /// - Parameters:
    ///   - reason: Why.
    ///   - held: What the session holds, read in the same critical section; `nil` once it has ended.
    ///   - now: The instant of the need, for the loop guard.
    /// - Returns: What to do.
    mutating func need(_ reason: Reason, holding held: Held?, at now: ContinuousClock.Instant) -> NeedAction {
        guard !hasEnded, let held else { return .fail(SessionError.ended) }
        // The request was sent with a token that has since been replaced: replay with the current one.
        if case .rejected(let rejected) = reason, held.tokens.accessToken != rejected {
            return .use(accessToken: held.tokens.accessToken)
        }
        if let flight {
            guard let handle = flight.handle else {
                preconditionFailure("\(flight.id) was joined before it was launched")
            }
            return .join(flight.id, handle)
        }
        // The per-request check's rule (`Lifetime.isExpiring(at:)`), not a second reckoning of it.
        if reason == .proactive, !held.expiring { return .use(accessToken: held.tokens.accessToken) }

        // Loop guard: successful refreshes count too.
        let window = window
        history.removeAll { $0.advanced(by: window) <= now }
        let counts = countsAgainstLoopGuard(held.tokens, reason: reason)
        guard !counts || history.count < maximumRefreshes else {
            return .fail(
                SessionError(.excessiveRefresh, "\(history.count) refreshes within \(window); refusing another"))
        }
        guard let refreshToken = held.tokens.refreshToken else {
            return .fail(SessionError(.accessExpired, "the access token was rejected and there is no refresh token"))
        }
        if counts { history.append(now) }
        lastID += 1
        let id = FlightID(rawValue: lastID)
        flight = Flight(id: id, refreshToken: refreshToken, countedAt: counts ? now : nil)
        return .start(id, refreshToken: refreshToken)
    }

    /// The flight ``need(_:holding:at:)`` asked for has been created: its handle is what later needs join.
    ///
    /// - Returns: `false` when `id` is not the flight in progress (cancel the handle's work).
    mutating func launched(_ id: FlightID, handle: Handle) -> Bool {
        guard flight?.id == id, flight?.handle == nil else { return false }
        flight?.handle = handle
        return true
    }

    /// Flight `id` has its outcome, committed to the session already when it is a success. It stays in progress
    /// (joinable) until ``flightFinished(_:)``, so that the owner hears of the outcome before anyone can start
    /// another refresh, and an owner that ends the session in reaction hands the waiters this outcome's error.
    ///
    /// A flight that failed before it asked the provider anything (the shared store's lock or record could not be
    /// had: a database away, a locked keyring) leaves the loop guard's history: the guard stops refresh loops the
    /// provider answers, and a store that is away for a minute must not leave its users refused for the guard's
    /// window once it is back.
    ///
    /// - Parameters:
    ///   - id: The flight.
    ///   - outcome: Its access token, or its error.
    ///   - reachedProvider: Whether a token request was sent (or tokens were adopted).
    /// - Returns: Whether `id` is the flight in progress.
    mutating func flightSettled(
        _ id: FlightID, outcome: Result<String, SessionError>, reachedProvider: Bool = true
    ) -> Bool {
        guard flight?.id == id else { return false }
        flight?.outcome = outcome
        if case .failure = outcome, !reachedProvider, let counted = flight?.countedAt,
            let index = history.firstIndex(of: counted)
        {
            history.remove(at: index)
        }
        return true
    }

    /// Flight `id` has left: the next need decides from the session's tokens.
    ///
    /// - Returns: Whether `id` was the flight in progress.
    @discardableResult
    mutating func flightFinished(_ id: FlightID) -> Bool {
        guard flight?.id == id else { return false }
        flight = nil
        return true
    }

    /// Flight `id` is about to send its token request: whether it may. Asked under the same lock as
    /// ``sessionEnded(with:keepingRecord:)``, so an ending either comes first (and nothing is sent) or finds the
    /// flight sending (and, keeping the record, releases it).
    ///
    /// - Returns: `false` when the session ended or `id` is not the flight in progress.
    mutating func sending(_ id: FlightID) -> Bool {
        guard !hasEnded, flight?.id == id else { return false }
        flight?.isSending = true
        return true
    }

    /// Whether flight `id` was released by an ending that kept the record: its rotation is stored there.
    func isReleased(_ id: FlightID) -> Bool {
        released == id
    }

    /// The session ended: every later need fails, and the flight in progress is cancelled, or released when the
    /// ending keeps the record and the flight's token request is on its way.
    ///
    /// A request on its way may have reached the server, which then retired the refresh token the record holds:
    /// cancelling it would lose the only refresh token the server still honours, and the account's next session
    /// (this process's or another's) would present the retired one and, with reuse detection, be signed out. A
    /// sign-out (`keepingRecord` false) cancels: its record is deleted and its grant revoked.
    ///
    /// - Parameters:
    ///   - error: What the flight's waiters get, unless the flight failed on its own (a rejected grant the owner
    ///     ends the session for keeps its error); a success too is `error` to a session that ended.
    ///   - keepingRecord: Whether the account's record outlives the session (``UserSession/end()``).
    /// - Returns: The flight to cancel or release, if any.
    mutating func sessionEnded(with error: SessionError, keepingRecord: Bool = false) -> EndAction {
        hasEnded = true
        guard let ending = flight else { return .none }
        flight = nil
        guard let handle = ending.handle else { return .none }
        if case .failure(let own)? = ending.outcome { return .cancel(handle, own) }
        if keepingRecord, ending.isSending, ending.outcome == nil {
            released = ending.id
            return .release(handle, error)
        }
        return .cancel(handle, error)
    }

    /// Whether a refresh for `reason` of `tokens` counts against the loop guard.
    ///
    /// Refreshes after a 401, forced ones, and proactive ones of tokens so short-lived that proactive refreshes
    /// alone could exceed `maximumRefreshes` within `window`, count; a proactive refresh of a token that lived long
    /// enough is the server working as designed, and never trips the guard, whatever else the window holds.
    func countsAgainstLoopGuard(_ tokens: TokenSet, reason: Reason) -> Bool {
        guard reason == .proactive, let lifetime = tokens.lifetime, maximumRefreshes > 0 else { return true }
        // A proactive refresh comes at least half a lifetime after the previous one.
        return lifetime / 2 * maximumRefreshes < window
    }

    /// What a refresh holding the cross-process lock does with the record it read from the shared store.
    ///
    /// Gone: the account was signed out in another process. Holding another refresh token: another process
    /// refreshed meanwhile, so its access token is used while it has time left, and otherwise its refresh token,
    /// the newest there is, is presented: the one in hand is retired, and presenting it again makes a server
    /// with reuse detection revoke the grant (RFC 9700 §4.14.2). Holding the token in hand: present it.
    ///
    /// - Parameters:
    ///   - stored: The record's tokens (`CredentialRecord.tokens(clock:)`: an expired access token is empty);
    ///     `nil` when there is no record.
    ///   - refreshToken: The refresh token the flight was started with.
    ///   - heldAccessToken: The access token the session holds now.
    ///   - now: The instant of the read.
    /// - Returns: What to do.
    static func storedRecordRead(
        _ stored: TokenSet?,
        presenting refreshToken: String,
        holding heldAccessToken: String?,
        at now: ContinuousClock.Instant
    ) -> StoredRecordAction {
        guard let stored else { return .signedOutElsewhere }
        guard let newest = stored.refreshToken, newest != refreshToken else {
            return .present(refreshToken: refreshToken)
        }
        let usable = !stored.accessToken.isEmpty && !stored.isExpired(at: now)
        if usable, stored.accessToken != heldAccessToken { return .adopt(stored) }
        return .present(refreshToken: newest)
    }
}

extension RefreshStateMachine.Reason {
    /// The cause's name in events.
    var diagnosticName: String {
        switch self {
        case .proactive: "proactive"
        case .rejected: "401"
        case .forced: "forced"
        }
    }
}

extension SessionError {
    /// What a refresh that the session's end overtook fails with, wherever the refresher notices the end.
    static var endedDuringRefresh: SessionError {
        SessionError(.sessionEnded, "the session ended while a refresh was in flight")
    }
}
