import Dispatch

#if canImport(FoundationNetworking)
    import FoundationNetworking
#else
    import Foundation
#endif

/// The wall-clock deadlines of HTTP exchanges, enforced by SessionKit rather than left to `URLSession`, behind one
/// timer: while any deadline is registered it wakes every ``resolution`` and fires those that have passed; with
/// none it does not run at all.
///
/// FoundationNetworking (Linux) does not enforce `timeoutIntervalForResource`, and `timeoutIntervalForRequest` is
/// an idle timeout: a server that sends one byte a second holds a request for as long as it likes. ``TaskBridge``
/// registers each exchange that has a deadline; when it passes before the exchange is answered, the ticker expires
/// its handle (``RequestHandle/expire(in:)``: the exchange is cancelled the way that cannot race its completion and
/// marked expired, so that the cancellation it then reports reads as a timeout).
///
/// It measures real time on the system's monotonic clock, never an injected ``SessionClock``: a test that moves
/// a manual clock by an hour must not end the requests in flight, and a real server is just as slow whatever
/// the test's clock says. A deadline fires at most ``resolution`` late.
///
/// A request pays no timer of its own (a `DispatchSourceTimer` per request wakes the dispatch manager thread twice
/// per request; figures in BENCHMARKS.md, "Figures behind the code's rules"), and no allocation or hashing either:
/// the registered handles form a doubly linked list through fields of their own (`RequestHandle.deadlineNext` and
/// its siblings), so registering and removing one is a lock and a few pointer writes.
package final class DeadlineTicker: Sendable {
    /// How late a deadline may fire.
    package static let resolution = Duration.milliseconds(100)

    /// The longest deadline: a century, "never", so that an absurd duration cannot overflow the instant. A constant,
    /// not built per request (`Duration.seconds(_:)` converts through a checked 128-bit integer).
    private static let longest = Duration.seconds(3_155_760_000)

    /// The ticker every exchange shares.
    package static let shared = DeadlineTicker()

    /// The instant deadlines are counted from. A deadline is kept as the `Duration` since then, not as a
    /// `ContinuousClock.Instant`: `Duration` has a fixed layout, while the instant's is known only inside Swift's
    /// concurrency library, so every copy and `nil` test of an optional deadline holding an instant goes through the
    /// runtime's value witnesses.
    private static let origin = ContinuousClock.now

    /// The time since ``origin``, on the continuous clock.
    private static var elapsed: Duration { origin.duration(to: .now) }

    private struct State {
        /// The first registered handle; each links to the next through its `deadlineNext`.
        var first: RequestHandle?
        var ticking = false
    }

    /// Guards `State` and the `deadline…` fields of every handle.
    private let state = Lock(State())
    private let queue = DispatchQueue(label: "SessionKit.DeadlineTicker")

    /// Registers `handle` to expire once `duration` from now has passed, unless ``remove(_:)`` comes first.
    ///
    /// - Parameters:
    ///   - handle: The exchange's handle, not registered yet. Expiring runs on a background queue; it may still
    ///     run when ``remove(_:)`` races it, and is harmless once the exchange has its answer.
    ///   - duration: How long the exchange may take from now.
    ///   - canceller: The session that created the exchange's task, through which expiring cancels it.
    package func add(_ handle: RequestHandle, after duration: Duration, cancellingThrough canceller: URLSession) {
        let at = Self.elapsed + min(max(duration, .zero), Self.longest)
        let start = state.withLock { state -> Bool in
            handle.deadline = RequestHandle.Deadline(at: at, canceller: canceller)
            handle.deadlineNext = state.first
            handle.deadlinePrevious = nil
            state.first?.deadlinePrevious = handle
            state.first = handle
            defer { state.ticking = true }
            return !state.ticking
        }
        if start { scheduleTick() }
    }

    /// Forgets `handle`'s deadline once its exchange has its answer; does nothing if it fired or was removed
    /// already.
    package func remove(_ handle: RequestHandle) {
        state.withLock { state in unlink(handle, from: &state) }
    }

    private func unlink(_ handle: RequestHandle, from state: inout State) {
        guard handle.deadline != nil else { return }
        handle.deadline = nil
        let next = handle.deadlineNext
        if let previous = handle.deadlinePrevious {
            previous.deadlineNext = next
        } else {
            state.first = next
        }
        next?.deadlinePrevious = handle.deadlinePrevious
        handle.deadlineNext = nil
        handle.deadlinePrevious = nil
    }

    private func scheduleTick() {
        let (seconds, attoseconds) = Self.resolution.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in tick() }
    }

    private func tick() {
        let now = Self.elapsed
        let (due, again) = state.withLock { state -> ([(RequestHandle, URLSession)], Bool) in
            var due: [(RequestHandle, URLSession)] = []
            var cursor = state.first
            while let handle = cursor {
                cursor = handle.deadlineNext
                if let deadline = handle.deadline, deadline.at <= now {
                    due.append((handle, deadline.canceller))
                    unlink(handle, from: &state)
                }
            }
            // Stops when nothing is left; the next `add` starts it again.
            state.ticking = state.first != nil
            return (due, state.ticking)
        }
        if again { scheduleTick() }
        for (handle, canceller) in due { handle.expire(in: canceller) }
    }
}
