import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// When a request may be sent again automatically, and how long to wait between attempts.
///
/// Replay is allowed only for methods RFC 9110 §9.2.2 defines as idempotent (GET, HEAD, OPTIONS, PUT,
/// DELETE, TRACE) or for a request that carries an `Idempotency-Key` header. Waits use exponential backoff with
/// full jitter; a server's `Retry-After` is a floor,
/// and waits after it are spread so that clients told the same `Retry-After` do not return in the same instant.
public struct RetryPolicy: Sendable {
    /// How many times a request may be sent in all, the first attempt included.
    public var maximumAttempts: Int
    /// The backoff base: attempt *n* waits a random time in `0 ..< base · 2ⁿ⁻¹`, capped by ``maximumDelay``.
    public var baseDelay: Duration
    /// The longest wait between two attempts, a server's `Retry-After` included.
    public var maximumDelay: Duration
    /// The HTTP statuses that are retried for a replayable request.
    public var retryableStatuses: Set<Int> {
        didSet { lowestRetryableStatus = retryableStatuses.min() ?? .max }
    }
    /// The lowest of ``retryableStatuses`` (`Int.max` for none): an answer below it, as nearly every one is, is
    /// told apart without reading the set.
    private var lowestRetryableStatus: Int
    /// Whether waits are drawn at random below the backoff ceiling (full jitter), so that many clients failing
    /// together do not retry together. Turn it off only to measure or test the synchronized worst case: every
    /// wait is then the whole ceiling.
    public var usesJitter: Bool

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - maximumAttempts: Attempts in all; `1` disables retries.
    ///   - baseDelay: The backoff base.
    ///   - maximumDelay: The longest wait.
    ///   - retryableStatuses: The statuses to retry.
    ///   - usesJitter: Whether waits are randomized (full jitter); on by default.
    public init(
        maximumAttempts: Int = 3,
        baseDelay: Duration = .milliseconds(200),
        maximumDelay: Duration = .seconds(10),
        retryableStatuses: Set<Int> = [429, 502, 503, 504],
        usesJitter: Bool = true
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
        self.retryableStatuses = retryableStatuses
        self.lowestRetryableStatus = retryableStatuses.min() ?? .max
        self.usesJitter = usesJitter
    }

    /// Whether `status` is one of ``retryableStatuses``: asked of every answer of a replayable request, so a status
    /// below the lowest of them is answered at once, and a short set is scanned (a few comparisons) rather than
    /// hashed (a SipHash round per answer).
    package func retries(status: Int) -> Bool {
        guard status >= lowestRetryableStatus else { return false }
        guard retryableStatuses.count > 8 else { return retryableStatuses.contains { $0 == status } }
        return retryableStatuses.contains(status)
    }

    /// One attempt and no automatic retry, for callers that decide about retries themselves.
    public static let never = RetryPolicy(maximumAttempts: 1)

    /// Whether `request` may be replayed without the caller's say-so (RFC 9110 §9.2.2).
    ///
    /// - Parameter request: The request.
    /// - Returns: `true` for idempotent methods and for requests with an `Idempotency-Key`.
    package static func isReplayable(_ request: URLRequest) -> Bool {
        switch HTTPMethod.of(request) {
        case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE": return true
        default: return request.value(forHTTPHeaderField: "Idempotency-Key") != nil
        }
    }

    /// The wait before attempt `attempt` (2 for the first retry): full jitter below the backoff ceiling, or, when
    /// the server gave a `Retry-After`, never earlier than it asked and spread over the interval after it.
    ///
    /// Waiting exactly `Retry-After` would send every client that failed together back together: a fleet told
    /// "retry in 1 s" by a struggling server would hit it in the same instant again. So with `Retry-After` the
    /// wait is drawn in `retryAfter ..< retryAfter + spread`, where the spread is the longer of the backoff
    /// ceiling and `retryAfter` itself (the next attempts land across one more such interval).
    ///
    /// - Parameters:
    ///   - attempt: The number of the attempt about to be made, from 2.
    ///   - retryAfter: The server's requested wait, if any.
    ///   - random: A number in `0 ..< 1`, injected so tests are deterministic; ignored when ``usesJitter`` is off,
    ///     when every wait is the whole ceiling, or exactly `Retry-After` when that is longer.
    /// - Returns: The wait, never longer than ``maximumDelay``.
    package func delay(beforeAttempt attempt: Int, retryAfter: Duration? = nil, random: Double) -> Duration {
        let exponent = min(max(attempt - 2, 0), 30)
        let ceiling = min(baseDelay * (1 << exponent), maximumDelay)
        let fraction = min(max(random, 0), 1)
        guard usesJitter else { return min(max(ceiling, retryAfter ?? .zero), maximumDelay) }
        guard let retryAfter, retryAfter > .zero else { return ceiling * fraction }
        return min(retryAfter + max(ceiling, retryAfter) * fraction, maximumDelay)
    }
}
