import Foundation

/// Exchanges a refresh token for new tokens (RFC 6749 §6): what a session calls when its access token
/// expires or is rejected.
///
/// ``OAuthClient`` is the implementation SessionKit ships; tests and apps with their own token service can
/// provide another. The session, not the endpoint, owns single flight, rotation, the loop guard and the
/// identity check at commit, so an implementation only sends one request and reads one answer.
public protocol TokenEndpoint: Sendable {
    /// Sends a `refresh_token` grant and returns the new tokens.
    ///
    /// - Parameter refreshToken: The refresh token to present.
    /// - Returns: The new token set, its expiry measured from the moment the response arrived.
    /// - Throws: ``SessionError``: `refreshRejected` for `invalid_grant`, `providerOutage` for 5xx and 429,
    ///   `networkUnavailable`, `timedOut`, `malformedTokenResponse`, `authorizationFailed`.
    func refresh(using refreshToken: String) async throws -> TokenSet
}

/// When a session refreshes its access token, and the bounds that stop a refresh loop.
public struct RefreshPolicy: Sendable {
    /// Refresh proactively when less than this remains of the access token's lifetime.
    ///
    /// For short-lived tokens the leeway and the jitter shrink together so that their sum is at most half the
    /// token's lifetime: a token is never refreshed proactively in the first half of its life.
    public var leeway: Duration
    /// Each session adds a random part of this to its leeway, so many clients do not refresh in step.
    public var jitter: Duration
    /// At most this many refreshes, successful ones included, within ``window``; a server that keeps answering
    /// 401 to fresh tokens is stopped here instead of being asked for a token in a loop.
    ///
    /// Proactive refreshes of tokens that live at least `2 × window / maximumRefreshes` (12 s by default) do not
    /// count: a well-behaved server never trips the guard.
    public var maximumRefreshes: Int
    /// The sliding window over which ``maximumRefreshes`` is counted: a refresh beyond the count within it fails
    /// with `excessiveRefresh` instead of reaching the token endpoint.
    public var window: Duration
    /// How long a caller waits for a refresh before giving up with `refreshTimedOut`.
    ///
    /// It bounds the caller's wait, not the refresh: a refresh that outlives its callers goes on, and every
    /// refresh needed meanwhile waits for it instead of presenting the same refresh token again. The token
    /// endpoint's own deadline (``OAuthClient``'s timeout) bounds the refresh.
    public var waitTimeout: Duration
    /// How transient token-endpoint failures (network, 5xx, 429) are retried within one refresh.
    public var retryPolicy: RetryPolicy

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - leeway: Proactive refresh margin.
    ///   - jitter: Random extra margin per session.
    ///   - maximumRefreshes: Loop guard count.
    ///   - window: Loop guard window.
    ///   - waitTimeout: Bound on waiting for a refresh.
    ///   - retryPolicy: Retries of transient failures.
    public init(
        leeway: Duration = .seconds(60),
        jitter: Duration = .seconds(15),
        maximumRefreshes: Int = 5,
        window: Duration = .seconds(30),
        waitTimeout: Duration = .seconds(30),
        retryPolicy: RetryPolicy = RetryPolicy(maximumAttempts: 3, baseDelay: .milliseconds(500))
    ) {
        self.leeway = leeway
        self.jitter = jitter
        self.maximumRefreshes = maximumRefreshes
        self.window = window
        self.waitTimeout = waitTimeout
        self.retryPolicy = retryPolicy
    }
}

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
actor TokenRefresher {
    /// A refresh in flight. It belongs to the refresher, not to the caller that started it: it ends only when the
    /// refresh itself resolves (or the session ends), whatever becomes of the callers waiting for it.
    private struct Flight: Sendable {
        let task: Task<Void, Never>
        let result: Broadcast<String>
        /// The refresh's own outcome once it has one: set before the owner hears of it, so that a session the
        /// owner ends in reaction (a rejected grant) hands its waiters that error, not a generic `sessionEnded`.
        let outcome: Lock<Result<String, any Error>?>
    }

    nonisolated let endpoint: any TokenEndpoint
    nonisolated let policy: RefreshPolicy
    nonisolated let clock: any SessionClock
    /// This session's share of the jitter, drawn once.
    nonisolated let jitterOffset: Duration
    /// The refresh in flight, reachable synchronously so `end()` can cancel it without awaiting the actor.
    private nonisolated let current = Lock<Flight?>(nil)

    /// How many callers wait for the refresh in flight; 0 without one (for tests that order a join).
    nonisolated var callersWaitingForFlight: Int { current.withLock { $0?.result.waiterCount ?? 0 } }
    private nonisolated let ended = Lock<Bool>(false)
    /// Tests only: runs inside a refresh between its two reads of the refresher's state (the flight in progress and
    /// the session's tokens), so that a test can finish a flight in exactly that window. `nil` everywhere else.
    nonisolated let betweenReads = Lock<(@Sendable () -> Void)?>(nil)
    private var history: [ContinuousClock.Instant] = []

    init(endpoint: any TokenEndpoint, policy: RefreshPolicy, clock: any SessionClock) {
        self.endpoint = endpoint
        self.policy = policy
        self.clock = clock
        let fraction = Double.random(in: 0..<1)
        self.jitterOffset = policy.jitter * fraction
    }

    /// Cancels the refresh in flight and resumes its waiters with `sessionEnded`; called by `UserSession.end()`.
    nonisolated func sessionEnded(
        with error: SessionError = SessionError(.sessionEnded, "the session ended while a refresh was in flight")
    ) {
        ended.withLock { $0 = true }
        let flight = current.withLock { flight -> Flight? in
            defer { flight = nil }
            return flight
        }
        guard let flight else { return }
        flight.task.cancel()
        // A refresh that failed on its own (a rejected grant the owner is ending the session for) keeps its error;
        // anything else, a success included, is `sessionEnded` to a session that has ended.
        if case .failure(let own)? = flight.outcome.withLock({ $0 }) {
            flight.result.resolve(.failure(own))
        } else {
            flight.result.resolve(.failure(error))
        }
    }

    /// Refreshes first when the session's access token is within the leeway of expiring.
    ///
    /// Every request calls this, and almost always the token is fresh: that check reads only constants and the
    /// session's lock, so it is made before hopping onto the actor, which then happens only for a refresh (whose
    /// isolated path checks again).
    ///
    /// - Parameter session: The session.
    /// - Returns: The access token when it was fresh, read under the same lock as the check (a request sends it
    ///   without reading the session again); `nil` after a refresh.
    /// - Throws: `sessionEnded` when the session has ended, and what a refresh throws.
    @discardableResult
    nonisolated func refreshIfExpiring(_ session: UserSession) async throws -> String? {
        if let fresh = try freshAccessToken(of: session) { return fresh.token }
        _ = try await refresh(session, rejected: nil)
        return nil
    }

    /// The session's access token if it is not within the leeway of expiring: the synchronous half of
    /// ``refreshIfExpiring(_:)``, for a caller that does not need to suspend when no refresh is due (a request's
    /// every attempt: no async frame and no executor check on that path).
    ///
    /// - Parameter session: The session.
    /// - Returns: The access token and the `Authorization` value that carries it, read under the same lock as the
    ///   check; `nil` when it is expiring (refresh it).
    /// - Throws: `sessionEnded` when the session has ended.
    nonisolated func freshAccessToken(of session: UserSession) throws -> UserSession.Credential? {
        let now = clock.now
        let current = session.lifetime.withLock { lifetime -> (credential: UserSession.Credential, expiring: Bool)? in
            guard lifetime.isActive, let credential = lifetime.credential else { return nil }
            // What was worked out when the tokens were held, read in place: copying the `TokenSet` out of the lock
            // would retain and release all its strings.
            return (credential, lifetime.isExpiring(at: now))
        }
        guard let current else { throw SessionError.ended }
        return current.expiring ? nil : current.credential
    }

    /// The instant from which `tokens`' access token counts as expiring, and is refreshed before it is sent: the
    /// instant at which `tokens.isExpired(at:leeway: margin(for: tokens))` becomes true.
    ///
    /// - Parameter tokens: The tokens in hand.
    /// - Returns: `nil` when the server gave no lifetime (the token never expires by the clock).
    nonisolated func expiringFrom(_ tokens: TokenSet) -> ContinuousClock.Instant? {
        tokens.expiresAt.map { $0.advanced(by: .zero - margin(for: tokens)) }
    }

    /// How long before expiry `tokens` are refreshed proactively: the policy's leeway plus this session's share of
    /// the jitter, scaled down for short-lived tokens so that the margin is never more than half the lifetime.
    ///
    /// Without the scaling a 60-second token with the default 60 s leeway would look expired the moment it arrived
    /// and every request would refresh. Scaled, a token is refreshed at the earliest half-way through its life,
    /// keeping the jitter's spread in proportion.
    ///
    /// - Parameter tokens: The tokens in hand.
    /// - Returns: The margin.
    nonisolated func margin(for tokens: TokenSet) -> Duration {
        Self.margin(lifetime: tokens.lifetime, leeway: policy.leeway, jitter: policy.jitter, offset: jitterOffset)
    }

    /// The proactive-refresh margin for a token of `lifetime`; see ``margin(for:)``.
    static func margin(lifetime: Duration?, leeway: Duration, jitter: Duration, offset: Duration) -> Duration {
        let full = leeway + offset
        guard let lifetime, lifetime > .zero else { return full }
        let ceiling = leeway + jitter
        let half = lifetime / 2
        guard ceiling > half, ceiling > .zero else { return full }
        return full * (half / ceiling)
    }

    /// Whether a proactive refresh of `tokens` counts against the loop guard.
    ///
    /// Refreshes after a 401, forced ones, and proactive ones of tokens so short-lived that proactive refreshes
    /// alone could exceed ``RefreshPolicy/maximumRefreshes`` within ``RefreshPolicy/window``, count; a proactive
    /// refresh of a token that lived long enough is the server working as designed, and never trips the guard.
    private func countsAgainstLoopGuard(_ tokens: TokenSet, proactive: Bool) -> Bool {
        guard proactive, let lifetime = tokens.lifetime, policy.maximumRefreshes > 0 else { return true }
        // A proactive refresh comes at least half a lifetime after the previous one.
        return lifetime / 2 * policy.maximumRefreshes < policy.window
    }

    /// Recovers from a 401 to a request sent with `rejectedToken`.
    ///
    /// - Parameters:
    ///   - session: The session.
    ///   - rejectedToken: The access token the rejected request carried.
    /// - Throws: What a refresh throws.
    func recover(_ session: UserSession, rejectedToken: String) async throws {
        _ = try await refresh(session, rejected: rejectedToken)
    }

    /// Refreshes now (single flight), whatever the token's expiry.
    ///
    /// - Parameter session: The session.
    /// - Returns: The new access token.
    /// - Throws: What a refresh throws.
    func forceRefresh(_ session: UserSession) async throws -> String {
        try await refresh(session, rejected: nil, force: true)
    }

    private func refresh(_ session: UserSession, rejected: String?, force: Bool = false) async throws -> String {
        let now = clock.now
        // The flight first, then the tokens. A flight commits its tokens before it leaves `current`, so tokens read
        // after finding no flight are those of the last flight or newer. The other way round, a flight that
        // committed and left between the two reads left this call holding the refresh token that flight had just
        // presented, and it presented it again: a server with reuse detection (RFC 9700 §4.14.2) revokes the grant.
        let inFlight = current.withLock { $0 }
        betweenReads.withLock { $0 }?()
        let held = session.lifetime.withLock { lifetime in
            lifetime.tokens.map { (tokens: $0, expiring: lifetime.isExpiring(at: now)) }
        }
        guard !ended.withLock({ $0 }), let (tokens, expiring) = held else {
            throw SessionError.ended
        }
        // The request was sent with a token that has since been replaced: replay with the current one.
        if let rejected, tokens.accessToken != rejected { return tokens.accessToken }
        if let flight = inFlight { return try await wait(for: flight, session: session) }
        let proactive = !force && rejected == nil
        // The per-request check's rule (`Lifetime.isExpiring(at:)`), not a second reckoning of it.
        if proactive, !expiring {
            return tokens.accessToken
        }

        // Loop guard: successful refreshes count too.
        history.removeAll { $0.advanced(by: policy.window) <= now }
        let counts = countsAgainstLoopGuard(tokens, proactive: proactive)
        guard !counts || history.count < policy.maximumRefreshes else {
            throw SessionError(
                .excessiveRefresh,
                "\(history.count) refreshes within \(policy.window); refusing another"
            )
        }
        guard let refreshToken = tokens.refreshToken else {
            throw SessionError(.accessExpired, "the access token was rejected and there is no refresh token")
        }
        if counts { history.append(now) }
        session.report(.refreshStarted)

        let result = Broadcast<String>()
        // The flight is published and its task created under one lock, and the task forgets the flight under the
        // same lock before it resolves it: the flight stays reachable exactly as long as the refresh runs, however
        // many callers stop waiting (a cancelled task, a wait that timed out), so no second refresh can present
        // the same refresh token meanwhile.
        let slot = current
        let settled = Lock<Result<String, any Error>?>(nil)
        let flight = slot.withLock { inFlight -> Flight in
            let task = Task { [endpoint, policy, clock] in
                let outcome = await Self.run(
                    endpoint: endpoint,
                    refreshToken: refreshToken,
                    policy: policy,
                    clock: clock,
                    session: session
                )
                settled.withLock { $0 = outcome }
                // Reported before the waiters resume, so the owner has reacted (ending the session, purging its
                // credentials) by the time any caller sees the error.
                if case .failure(let error as SessionError) = outcome {
                    session.report(error.code == .refreshRejected ? .refreshRejected(error) : .refreshFailed(error))
                }
                slot.withLock { flight in
                    if flight?.result === result { flight = nil }
                }
                result.resolve(outcome)
            }
            let flight = Flight(task: task, result: result, outcome: settled)
            inFlight = flight
            return flight
        }
        if ended.withLock({ $0 }) { sessionEnded() }
        return try await wait(for: flight, session: session)
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

    /// Refreshes: with the store's cross-process lock when it has one, else at once.
    ///
    /// Holding the lock, the stored record is read again: gone, the account was signed out in another process and
    /// the session ends; holding another refresh token, another process refreshed meanwhile, and its access token
    /// is used while it is valid (its refresh token otherwise, the newest there is). Only a record that still holds
    /// the token in hand is refreshed, and the lock is released once the result is stored.
    private static func run(
        endpoint: any TokenEndpoint,
        refreshToken: String,
        policy: RefreshPolicy,
        clock: any SessionClock,
        session: UserSession
    ) async -> Result<String, any Error> {
        guard let store = session.vault?.store, let lock = store.refreshLock else {
            return await exchange(
                endpoint: endpoint, refreshToken: refreshToken, policy: policy, clock: clock, session: session)
        }
        let held: CrossProcessLock.Held
        do {
            held = try await lock.acquire()
        } catch let error as SessionError {
            return .failure(error)
        } catch {
            return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
        }
        defer { held.release() }
        guard !Task.isCancelled, session.isActive else {
            return .failure(SessionError(.sessionEnded, "the session ended while a refresh was in flight"))
        }
        // Read from the store itself, not behind this process's queue for the account: a sign-out's deletion
        // queued there waits for this lock.
        let record: CredentialRecord?
        do {
            record = try await store.load(for: session.account)
        } catch {
            return .failure(
                error as? SessionError
                    ?? SessionError(.storageFailure, "the stored record could not be read (\(type(of: error)))"))
        }
        guard let record else {
            session.endSignedOutElsewhere()
            return .failure(SessionError(.sessionEnded, "the account was signed out in another process"))
        }
        var presented = refreshToken
        if let stored = record.refreshToken, stored != refreshToken {
            if let tokens = storedTokens(record, clock: clock), tokens.accessToken != session.tokens?.accessToken {
                guard case .committed(let accessToken, _) = session.adoptStored(tokens) else {
                    return .failure(SessionError(.sessionEnded, "the session ended before the refresh completed"))
                }
                session.report(.refreshed)
                return .success(accessToken)
            }
            presented = stored
        }
        let outcome = await exchange(
            endpoint: endpoint, refreshToken: presented, policy: policy, clock: clock, session: session)
        // A rejected grant's record is deleted before the lock is released, so no other process presents it again.
        if case .failure(let error as SessionError) = outcome, error.code == .refreshRejected,
            (try? await store.load(for: session.account))?.refreshToken == presented
        {
            try? await store.delete(for: session.account)
        }
        return outcome
    }

    /// The tokens of a record another process stored, when it holds an access token with time left.
    static func storedTokens(_ record: CredentialRecord, clock: any SessionClock) -> TokenSet? {
        let tokens = record.tokens(clock: clock)
        return tokens.accessToken.isEmpty ? nil : tokens
    }

    /// Sends the refresh (with retries of transient failures) and commits its result.
    private static func exchange(
        endpoint: any TokenEndpoint,
        refreshToken: String,
        policy: RefreshPolicy,
        clock: any SessionClock,
        session: UserSession
    ) async -> Result<String, any Error> {
        var attempt = 1
        while true {
            guard !Task.isCancelled, session.isActive else {
                return .failure(SessionError(.sessionEnded, "the session ended while a refresh was in flight"))
            }
            do {
                let tokens = try await endpoint.refresh(using: refreshToken)
                // Commit in one step that first checks the session is still active; then wait for the store
                // write, so no waiter resumes before the rotated refresh token is durable.
                switch session.commitRefreshed(tokens) {
                case .ended:
                    return .failure(SessionError(.sessionEnded, "the session ended before the refresh completed"))
                case .committed(let accessToken, let write):
                    if let write {
                        if let error = await write.value {
                            session.report(.storageFailed(error))
                        } else {
                            session.report(.stored)
                        }
                    }
                    session.report(.refreshed)
                    return .success(accessToken)
                }
            } catch let error as SessionError where error.isTransient && attempt < policy.retryPolicy.maximumAttempts {
                attempt += 1
                let delay = policy.retryPolicy.delay(
                    beforeAttempt: attempt,
                    retryAfter: error.retryAfter,
                    random: Double.random(in: 0..<1)
                )
                do { try await clock.sleep(for: delay) } catch {
                    return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
                }
            } catch let error as SessionError {
                if error.code == .sessionEnded || !session.isActive {
                    return .failure(SessionError(.sessionEnded, "the session ended while a refresh was in flight"))
                }
                return .failure(error)
            } catch is CancellationError {
                return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
            } catch {
                return .failure(SessionError(.networkUnavailable, "token request failed: \(type(of: error))"))
            }
        }
    }
}

extension SessionError {
    static var ended: SessionError { SessionError(.sessionEnded, "the session has ended") }
}
