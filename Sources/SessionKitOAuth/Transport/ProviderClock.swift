import Foundation

/// The provider's clock as this device can know it: its wall clock corrected by the offset the provider's last
/// `Date` header showed.
///
/// ID token times are the provider's, so they are compared with the provider's clock: a device whose clock is set
/// an hour wrong would otherwise refuse every fresh token, or accept one an hour expired. Every answer of the
/// provider's (discovery, keys, tokens) updates the offset; until one has, the device's clock stands in.
package final class ProviderClock: Sendable {
    private let offset = Lock<TimeInterval?>(nil)

    package init() {}

    /// Records an answer's `Date` against the local wall time it arrived at.
    ///
    /// - Parameters:
    ///   - serverDate: The answer's `Date` header.
    ///   - receivedAtWall: When the answer arrived, on this device's wall clock.
    package func record(serverDate: Date, receivedAtWall: Date) {
        let measured = serverDate.timeIntervalSince(receivedAtWall)
        offset.withLock { $0 = measured }
    }

    /// How far the provider's clock is ahead of this device's, or `nil` before any answer carried a `Date`.
    package var measuredOffset: TimeInterval? { offset.withLock { $0 } }

    /// The provider's current time.
    ///
    /// - Parameter wallNow: This device's wall clock now.
    /// - Returns: `wallNow` corrected by the last measured offset.
    package func now(wallNow: Date) -> Date {
        wallNow.addingTimeInterval(measuredOffset ?? 0)
    }
}
