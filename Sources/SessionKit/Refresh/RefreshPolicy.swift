import SessionKitOAuth

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
