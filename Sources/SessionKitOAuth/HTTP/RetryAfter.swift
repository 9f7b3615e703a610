import Foundation

/// Parses `Retry-After` (RFC 9110 §10.2.3): how long a client should wait before trying again.
package enum RetryAfter {
    /// The longest wait ``parse(_:now:)`` returns: one day.
    ///
    /// A server that asks for more (a misconfigured date, `Retry-After: 99999999`) would otherwise park a client
    /// indefinitely; after a day, asking again is cheap and the server can repeat its answer.
    public static let maximumDelay: Duration = .seconds(86_400)

    /// Parses delay-seconds (`120`) or an HTTP-date, relative to `now`.
    ///
    /// - Parameters:
    ///   - value: The field value; surrounding whitespace is ignored.
    ///   - now: The current wall-clock time, which an HTTP-date is measured from.
    /// - Returns: The wait, at most ``maximumDelay``; zero for a date equal to `now`; nil for a date in the
    ///   past, a negative or fractional number, or anything else that is neither form.
    public static func parse(_ value: String, now: Date) -> Duration? {
        let bytes = Array(value.utf8)
        let trimmed = HTTPFieldSyntax.trimmed(bytes[...])
        if let first = trimmed.first, HTTPFieldSyntax.isDigit(first) {
            guard let seconds = HTTPFieldSyntax.deltaSeconds(trimmed) else { return nil }
            return min(.seconds(seconds), maximumDelay)
        }
        guard let date = HTTPDate.parse(value, referenceDate: now) else { return nil }
        let interval = date.timeIntervalSince(now)
        guard interval.isFinite, interval >= 0 else { return nil }
        return min(.seconds(min(interval, 86_400 * 2)), maximumDelay)
    }
}
