import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// When a request may be sent again automatically, and how long to wait between attempts.
///
/// Replay is allowed only for methods RFC 9110 §9.2.2 defines as idempotent (GET, HEAD, OPTIONS, PUT,
/// DELETE, TRACE) or for a request that carries an `Idempotency-Key` header. Waits use exponential backoff with
/// full jitter, and a server's `Retry-After` is honoured when it asks for longer.
public struct RetryPolicy: Sendable {
    /// How many times a request may be sent in all, the first attempt included.
    public var maximumAttempts: Int
    /// The backoff base: attempt *n* waits a random time in `0 ..< base · 2ⁿ⁻¹`, capped by ``maximumDelay``.
    public var baseDelay: Duration
    /// The longest wait between two attempts, a server's `Retry-After` included.
    public var maximumDelay: Duration
    /// The HTTP statuses that are retried for a replayable request.
    public var retryableStatuses: Set<Int>

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - maximumAttempts: Attempts in all; `1` disables retries.
    ///   - baseDelay: The backoff base.
    ///   - maximumDelay: The longest wait.
    ///   - retryableStatuses: The statuses to retry.
    public init(
        maximumAttempts: Int = 3,
        baseDelay: Duration = .milliseconds(200),
        maximumDelay: Duration = .seconds(10),
        retryableStatuses: Set<Int> = [429, 502, 503, 504]
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
        self.retryableStatuses = retryableStatuses
    }

    /// One attempt and no automatic retry, for callers that decide about retries themselves.
    public static let never = RetryPolicy(maximumAttempts: 1)

    /// Whether `request` may be replayed without the caller's say-so (RFC 9110 §9.2.2).
    ///
    /// - Parameter request: The request.
    /// - Returns: `true` for idempotent methods and for requests with an `Idempotency-Key`.
    public static func isReplayable(_ request: URLRequest) -> Bool {
        let method = (request.httpMethod ?? "GET").uppercased()
        if ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"].contains(method) { return true }
        return request.value(forHTTPHeaderField: "Idempotency-Key") != nil
    }

    /// The wait before attempt `attempt` (2 for the first retry), full jitter, at least `retryAfter` if given.
    ///
    /// - Parameters:
    ///   - attempt: The number of the attempt about to be made, from 2.
    ///   - retryAfter: The server's requested wait, if any.
    ///   - random: A number in `0 ..< 1`, injected so tests are deterministic.
    /// - Returns: The wait, never longer than ``maximumDelay``.
    public func delay(beforeAttempt attempt: Int, retryAfter: Duration? = nil, random: Double) -> Duration {
        let exponent = min(max(attempt - 2, 0), 30)
        let ceiling = min(baseDelay * (1 << exponent), maximumDelay)
        let jittered = ceiling * min(max(random, 0), 1)
        return min(max(jittered, retryAfter ?? .zero), maximumDelay)
    }
}
