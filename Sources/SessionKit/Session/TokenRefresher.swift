import SessionKitOAuth

/// Refreshes one session's access token: one refresh at a time, never after the session ended.
///
/// - Single flight: callers that need a refresh while one is running wait for that one; K concurrent 401s
///   make one token request.
/// - A 401 for a token that has since been replaced is answered with the current token, without a refresh.
/// - The result is committed (memory, then the credential store) in one step that first checks the session is
///   still active, and the store write completes before any waiter resumes. A result that arrives after the
///   session ended is dropped: stored nowhere, used by nothing; its waiters get `sessionEnded`.
/// - Transient failures are retried with backoff and full jitter, honouring `Retry-After`; `invalid_grant` is
///   terminal.
/// - A loop guard caps refreshes per window.
///
/// Every decision is ``RefreshStateMachine``'s; this type is its effect shell. It owns the machine under one lock
/// and performs what the machine answers: it creates the flight's task, waits for it through a ``Broadcast``, runs
/// the exchange as ``RefreshStateMachine/Exchange`` directs (the store's cross-process lock, retries, a rejected
/// grant's record), commits through the session and reports events. It is a `final class`, not an actor: all its state is the machine, changed in short synchronous critical
/// sections, and nothing it does needs isolation across a suspension (a flight re-checks the session after every
/// `await`), so an actor would only add a hop and a second serialization in front of the lock.
///
/// - Important: Lock order: the refresher's lock, then the session's `lifetime` lock, never the reverse. A need
///   reads the session's tokens inside the machine's critical section, and a flight commits its tokens to the
///   session before the machine hears it finished, so a need finds either the flight or its tokens. Nothing runs
///   under the refresher's lock but the machine, that read, and the creation of a flight's task; events are
///   reported, tasks cancelled and waiters resumed after it is released.
final class TokenRefresher: Sendable {
    /// A refresh in flight. It belongs to the refresher, not to the caller that started it: it ends only when the
    /// refresh itself resolves (or the session ends), whatever becomes of the callers waiting for it.
    struct Flight: Sendable {
        let task: Task<Void, Never>
        let result: Broadcast<String>
    }

    typealias Machine = RefreshStateMachine<Flight>

    let endpoint: any TokenEndpoint
    let policy: RefreshPolicy
    let clock: any SessionClock
    /// This session's share of the jitter, drawn once.
    let jitterOffset: Duration
    private let state: Lock<Machine>

    /// The flight in progress, if any. Read outside the lock, a flight in progress always has its handle: it is
    /// launched in the critical section that starts it.
    private var flight: Flight? { withMachine { $0.flightHandle } }

    /// How many callers wait for the refresh in flight; 0 without one (for tests that order a join).
    var callersWaitingForFlight: Int { flight?.result.waiterCount ?? 0 }

    /// Whether a flight is in progress: until it has reported its outcome and left (for tests that wait for a
    /// refresh whose callers went away, and for the owner's reaction to it).
    var hasFlightInProgress: Bool { flight != nil }

    /// The task of the flight in progress, if any: it ends once the refresh has committed or reported its outcome
    /// (and the owner has reacted), for ``SessionManager/finishPendingWork(within:)``.
    var flightTask: Task<Void, Never>? { flight?.task }

    init(endpoint: any TokenEndpoint, policy: RefreshPolicy, clock: any SessionClock) {
        self.endpoint = endpoint
        self.policy = policy
        self.clock = clock
        let fraction = Double.random(in: 0..<1)
        self.jitterOffset = policy.jitter * fraction
        self.state = Lock(Machine(maximumRefreshes: policy.maximumRefreshes, window: policy.window))
    }

    /// Cancels the refresh in flight and resumes its waiters with `sessionEnded`; called when the session ends.
    ///
    /// - Parameters:
    ///   - error: What the waiters get.
    ///   - kept: The session, when its record outlives it (``UserSession/end()``) in a store; `nil` for a sign-out. A
    ///     flight whose token request is already on its way is then released, not cancelled: its waiters get
    ///     `error` at once, and it runs on to store the rotation in the record
    ///     (``RefreshStateMachine/sessionEnded(with:keepingRecord:)``). The vault's queue for the account waits
    ///     for it, so a deletion asked for meanwhile runs after it, and ``SessionManager/finishPendingWork(within:)``
    ///     waits for it too.
    func sessionEnded(
        with error: SessionError = .endedDuringRefresh, keepingRecordOf kept: UserSession? = nil
    ) {
        let vault = kept?.vault
        let action = withMachine { $0.sessionEnded(with: error, keepingRecord: vault != nil) }
        switch action {
        case .none:
            return
        case .cancel(let flight, let resolution):
            flight.task.cancel()
            flight.result.resolve(.failure(resolution))
        case .release(let flight, let resolution):
            if let vault, let kept { vault.enqueueWait(for: flight.task, on: kept.account) }
            flight.result.resolve(.failure(resolution))
        }
    }

    /// Refreshes first when the session's access token is within the leeway of expiring.
    ///
    /// For the kinds that need a token before they start (the pipeline after its own read of the credential found it
    /// expiring, the token hand-off, WebSocket handshakes). The check reads only constants and the session's lock;
    /// the refresher's own lock is taken only for a refresh (which checks again).
    ///
    /// - Parameter session: The session.
    /// - Returns: The access token when it was fresh, read under the same lock as the check; `nil` after a refresh.
    /// - Throws: `sessionEnded` when the session has ended, and what a refresh throws.
    @discardableResult
    func refreshIfExpiring(_ session: UserSession) async throws -> String? {
        // What was worked out when the tokens were held, read in place: copying the `TokenSet` out of the lock
        // would retain and release all its strings.
        guard
            case .credential(let credential?, let expiring, _) = session.lifetime(
                .credential(at: clock.now, nonceFor: nil))
        else { throw SessionError.ended }
        if !expiring { return credential.token }
        _ = try await refresh(session, .proactive)
        return nil
    }

    /// The instant from which `tokens`' access token counts as expiring, and is refreshed before it is sent
    /// (``RefreshStateMachine/expiringFrom(_:margin:)`` with ``margin(for:)``).
    ///
    /// Called under the session's `lifetime` lock: it reads constants only, never the refresher's lock.
    ///
    /// - Parameter tokens: The tokens in hand.
    /// - Returns: `nil` when the server gave no lifetime (the token never expires by the clock).
    func expiringFrom(_ tokens: TokenSet) -> ContinuousClock.Instant? {
        Machine.expiringFrom(tokens, margin: margin(for: tokens))
    }

    /// How long before expiry `tokens` are refreshed proactively (``RefreshStateMachine/margin(lifetime:leeway:jitter:offset:)``
    /// with this session's policy and share of the jitter).
    ///
    /// - Parameter tokens: The tokens in hand.
    /// - Returns: The margin.
    func margin(for tokens: TokenSet) -> Duration {
        Machine.margin(lifetime: tokens.lifetime, leeway: policy.leeway, jitter: policy.jitter, offset: jitterOffset)
    }

    /// Recovers from a 401 to a request sent with `rejectedToken`.
    ///
    /// - Parameters:
    ///   - session: The session.
    ///   - rejectedToken: The access token the rejected request carried.
    /// - Throws: What a refresh throws.
    func recover(_ session: UserSession, rejectedToken: String) async throws {
        _ = try await refresh(session, .rejected(accessToken: rejectedToken))
    }

    /// Refreshes now (single flight), whatever the token's expiry.
    ///
    /// - Parameter session: The session.
    /// - Returns: The new access token.
    /// - Throws: What a refresh throws.
    func forceRefresh(_ session: UserSession) async throws -> String {
        try await refresh(session, .forced)
    }

    private enum Step {
        case use(String)
        case wait(Machine.FlightID, Flight)
        case fail(SessionError)
    }

    private func refresh(_ session: UserSession, _ reason: Machine.Reason) async throws -> String {
        let now = clock.now
        let step = state.withLock { machine -> Step in
            // The session's tokens, read inside the machine's critical section (the refresher's lock, then the
            // session's): a flight commits before it finishes, so these are its tokens or it is still in progress.
            var held: Machine.Held?
            if case .held(let tokens?, let expiring) = session.lifetime(.held(at: now)) {
                held = Machine.Held(tokens: tokens, expiring: expiring)
            }
            switch machine.need(reason, holding: held, at: now) {
            case .use(let accessToken):
                return .use(accessToken)
            case .fail(let error):
                if error.code == .excessiveRefresh {
                    session.diagnose(
                        .error, .loopGuardTripped,
                        ["refreshes": "\(machine.maximumRefreshes)", "window": machine.window.diagnosticMilliseconds])
                }
                return .fail(error)
            case .join(let id, let flight):
                session.diagnose(.debug, .refreshJoined, ["cause": reason.diagnosticName])
                return .wait(id, flight)
            case .start(let id, let refreshToken):
                // Created under the lock that publishes it: the flight is reachable exactly as long as it runs,
                // however many callers stop waiting, so no second refresh presents the same token meanwhile.
                let flight = launch(id, presenting: refreshToken, for: session, cause: reason.diagnosticName)
                let launched = machine.launched(id, handle: flight)
                assert(launched, "\(id) was started and launched in one critical section")
                return .wait(id, flight)
            }
        }
        switch step {
        case .use(let accessToken): return accessToken
        case .fail(let error): throw error
        case .wait(_, let flight): return try await wait(for: flight, session: session)
        }
    }

    /// Runs `body` on the machine under its lock: every short question and answer to it goes through here (the need's
    /// decision, which also reads the session and launches a flight, takes the lock in ``refresh(_:_:)``).
    private func withMachine<Result>(_ body: (inout Machine) -> Result) -> Result {
        state.withLock(body)
    }

    /// Whether flight `id` may send its token request now (``RefreshStateMachine/sending(_:)``): `false` once the
    /// session ended.
    func maySend(_ id: Machine.FlightID) -> Bool {
        withMachine { $0.sending(id) }
    }

    /// Whether flight `id` was released by an ending that kept the record (``RefreshStateMachine/isReleased(_:)``).
    func wasReleased(_ id: Machine.FlightID) -> Bool {
        withMachine { $0.isReleased(id) }
    }

    /// Creates flight `id`'s task: it refreshes, commits to the session, then tells the machine, then resolves.
    private func launch(
        _ id: Machine.FlightID, presenting refreshToken: String, for session: UserSession, cause: String
    ) -> Flight {
        let result = Broadcast<String>()
        let clock = clock
        let task = Task {
            session.report(.refreshStarted)
            let started = clock.now
            var sent = false
            let obtained = await run(id, presenting: refreshToken, for: session, cause: cause, sent: &sent)
            Self.diagnose(obtained, of: session, cause: cause, took: clock.now - started)
            let outcome = obtained.map(\.accessToken)
            // Settled before the owner hears of it, and finished after: the owner has reacted (ending the session,
            // purging its credentials) before anyone can start another refresh or see the error, and a session it
            // ends in reaction hands the waiters this error, not a generic `sessionEnded`.
            let current = withMachine { [sent] in $0.flightSettled(id, outcome: outcome, reachedProvider: sent) }
            if current, case .failure(let error) = outcome {
                session.report(error.endsGrant ? .refreshRejected(error) : .refreshFailed(error))
            }
            _ = withMachine { $0.flightFinished(id) }
            result.resolve(outcome.mapError { $0 })
        }
        return Flight(task: task, result: result)
    }

    /// Emits a refresh's outcome: its cause, how long it took, and for a failure the code (and the OAuth error a
    /// rejection carried). Tokens another process had stored are told as adopted, not as a refresh of this one.
    private static func diagnose(
        _ outcome: Result<Obtained, SessionError>, of session: UserSession, cause: String, took: Duration
    ) {
        let milliseconds = took.diagnosticMilliseconds
        switch outcome {
        case .success(let obtained) where obtained.adopted:
            session.diagnose(.info, .refreshAdopted, ["cause": cause, "milliseconds": milliseconds])
        case .success:
            session.diagnose(.info, .refreshSucceeded, ["cause": cause, "milliseconds": milliseconds])
        case .failure(let error) where error.endsGrant:
            var fields = ["cause": cause, "code": "\(error.code)", "milliseconds": milliseconds]
            if let oauthError = error.oauthError { fields["oauthError"] = oauthError }
            session.diagnose(.error, .refreshRejected, fields)
        case .failure(let error):
            session.diagnose(
                .warning, .refreshFailed, ["cause": cause, "code": "\(error.code)", "milliseconds": milliseconds])
        }
    }

    /// Waits for `flight` within the wait timeout. A wait that times out is reported as a failed refresh (the
    /// state shows offline rather than refreshing), while the refresh itself goes on and reports its own outcome.
    private func wait(for flight: Flight, session: UserSession) async throws -> String {
        do {
            return try await flight.result.value(
                deadline: clock.now.advanced(by: policy.waitTimeout),
                clock: clock,
                timeoutError: SessionError(
                    .refreshTimedOut, "gave up waiting \(policy.waitTimeout) for a token refresh")
            )
        } catch let error as SessionError where error.code == .refreshTimedOut {
            session.report(.refreshFailed(error))
            throw error
        }
    }
}
