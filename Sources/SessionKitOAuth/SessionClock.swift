import Foundation

/// The clock SessionKit reads for every time-based decision: expiry, leeway, backoff, timeouts.
///
/// Decisions use ``now``, a monotonic instant that a wrong or changing wall clock cannot move. The wall clock
/// is read only to write and read records that must survive a restart, where no monotonic clock survives.
/// Tests inject a manual clock (`SessionKitTesting.ManualClock`) to order events without sleeping.
public protocol SessionClock: Sendable {
    /// The current monotonic instant.
    var now: ContinuousClock.Instant { get }
    /// The current wall-clock time, used only for records that outlive the process.
    var wallNow: Date { get }
    /// Suspends until `deadline`, or throws `CancellationError` when the task is cancelled.
    ///
    /// - Parameter deadline: The monotonic instant to wake at.
    /// - Throws: `CancellationError` if cancelled first.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

extension SessionClock {
    /// Suspends for `duration`, or throws `CancellationError` when the task is cancelled.
    ///
    /// - Parameter duration: How long to wait.
    /// - Throws: `CancellationError` if cancelled first.
    public func sleep(for duration: Duration) async throws {
        try await sleep(until: now.advanced(by: duration))
    }
}

/// The system's clocks: `ContinuousClock` for decisions, `Date()` for stored records.
///
/// What a configuration reads when it is given no clock (`clock: nil`); apps never need to name it.
package struct SystemClock: SessionClock {
    /// Creates the system clock.
    package init() {}

    /// The current `ContinuousClock` instant.
    package var now: ContinuousClock.Instant { ContinuousClock.now }

    /// The current `Date`.
    package var wallNow: Date { Date() }

    /// Sleeps on `ContinuousClock`.
    ///
    /// - Parameter deadline: The instant to wake at.
    /// - Throws: `CancellationError` if cancelled first.
    package func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await ContinuousClock().sleep(until: deadline, tolerance: nil)
    }
}
