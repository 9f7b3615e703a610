import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// TEMPORARY: replaced by the real ResponseCache when the `cache` branch merges. Caches nothing.

/// A private per-session HTTP cache (placeholder that caches nothing).
public final class ResponseCache: Sendable {
    /// A stored response.
    public struct CachedResponse: Sendable {
        /// The response.
        public let response: HTTPURLResponse
        /// The body.
        public let body: Data
    }

    /// The outcome of a lookup.
    public enum Lookup {
        /// Fresh: serve it.
        case fresh(CachedResponse)
        /// Stale or no-cache: send with these conditional headers.
        case needsValidation(CachedResponse, conditionalHeaders: [String: String])
        /// Nothing stored.
        case miss
    }

    /// Creates a cache.
    ///
    /// - Parameters:
    ///   - maximumBytes: The bound.
    ///   - clock: The clock.
    public init(maximumBytes: Int = 4 * 1024 * 1024, clock: any SessionClock = SystemClock()) {}

    /// Looks up a response.
    ///
    /// - Parameter request: The request.
    /// - Returns: Always a miss.
    public func lookup(for request: URLRequest) -> Lookup { .miss }

    /// Stores a response.
    ///
    /// - Parameters:
    ///   - response: The response.
    ///   - body: The body.
    ///   - request: The request.
    ///   - requestSentAt: When sent.
    ///   - responseReceivedAt: When received.
    public func store(
        _ response: HTTPURLResponse,
        body: Data,
        for request: URLRequest,
        requestSentAt: ContinuousClock.Instant,
        responseReceivedAt: ContinuousClock.Instant
    ) {}

    /// Applies a 304.
    ///
    /// - Parameters:
    ///   - response: The 304.
    ///   - request: The request.
    /// - Returns: Always nil.
    public func revalidated(_ response: HTTPURLResponse, for request: URLRequest) -> CachedResponse? { nil }

    /// Invalidates entries for a request's URL.
    ///
    /// - Parameter request: The request.
    public func invalidate(for request: URLRequest) {}

    /// Empties the cache.
    public func removeAll() {}
}

/// Placeholder Retry-After parser: delay-seconds only.
public enum RetryAfter {
    /// Parses delay-seconds.
    ///
    /// - Parameters:
    ///   - value: The header value.
    ///   - now: The wall clock.
    /// - Returns: The delay.
    public static func parse(_ value: String, now: Date) -> Duration? {
        Int(value.trimmingCharacters(in: .whitespaces)).flatMap { $0 >= 0 ? .seconds($0) : nil }
    }
}
