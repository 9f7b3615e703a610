import Foundation
import SessionKit

/// A ``/SessionKit/SessionClock`` that moves only when a test moves it, so tests order time-based events without sleeping.
///
/// The monotonic clock and the wall clock move separately: ``advance(by:)`` moves both, ``shiftWallClock(by:)``
/// moves only the wall clock (a user changing the time, a device 24 hours off), which must never change a
/// SessionKit decision.
public final class ManualClock: SessionClock {
    private struct Sleeper {
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var offset: Duration = .zero
        var wallOffset: TimeInterval = 0
        var sleepers: [Int: Sleeper] = [:]
        var nextID = 0
    }

    private let base = ContinuousClock.now
    private let wallBase: Date
    private let state = Lock(State())

    /// Creates a clock whose wall clock starts at `wallClock`.
    ///
    /// - Parameter wallClock: The initial wall-clock time.
    public init(wallClock: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        self.wallBase = wallClock
    }

    /// The current monotonic instant.
    public var now: ContinuousClock.Instant {
        base.advanced(by: state.withLock { $0.offset })
    }

    /// The current wall-clock time.
    public var wallNow: Date {
        let (offset, wallOffset) = state.withLock { ($0.offset, $0.wallOffset) }
        return wallBase.addingTimeInterval(Double(offset.components.seconds) + wallOffset)
    }

    /// How many tasks are sleeping on the clock: lets a test wait until work has reached its sleep.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The instants the sleeping tasks wake at, earliest first: lets a test wait until a given sleep has begun,
    /// where a count could be met by another sleep still on its way out.
    public var sleepingUntil: [ContinuousClock.Instant] {
        state.withLock { $0.sleepers.values.map(\.deadline) }.sorted()
    }

    /// Suspends until the clock has been advanced to `deadline`.
    ///
    /// - Parameter deadline: The instant to wake at.
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Result<Void, any Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if base.advanced(by: state.offset) >= deadline { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let resumeNow { continuation.resume(with: resumeNow) }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves both clocks forward and wakes every sleeper whose deadline has come.
    ///
    /// - Parameter duration: How far to move; must not be negative.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a monotonic clock never goes back")
        let due = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.offset += duration
            let now = base.advanced(by: state.offset)
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    /// Moves only the wall clock, as when a user changes the device's time.
    ///
    /// - Parameter interval: Seconds to add (negative moves it back).
    public func shiftWallClock(by interval: TimeInterval) {
        state.withLock { $0.wallOffset += interval }
    }
}
