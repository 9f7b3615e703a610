import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Refreshes the access token now, whatever the current one's expiry; the session holds the new tokens when
    /// this returns.
    ///
    /// - Important: Single flight: a call made while a refresh is running waits for that refresh instead of
    ///   starting another, and every refresh counts against ``RefreshPolicy``'s loop guard.
    /// - Throws: ``SessionError``: `accessExpired` when the session cannot refresh, and the refresh errors.
    public func refreshTokens() async throws {
        guard let refresher else {
            throw SessionError(.accessExpired, "this session has no token endpoint to refresh with")
        }
        _ = try await refresher.forceRefresh(self)
    }

    func backoff(before attempt: Int, retryAfter: Duration?) async throws {
        let delay = configuration.retryPolicy.delay(
            beforeAttempt: attempt,
            retryAfter: retryAfter,
            random: Double.random(in: 0..<1)
        )
        try await configuration.clock.sleep(for: delay)
    }

    func retryAfter(of response: HTTPURLResponse) -> Duration? {
        guard let value = response.value(forHTTPHeaderField: "Retry-After") else { return nil }
        return RetryAfter.parse(value, now: configuration.clock.wallNow)
    }
}
