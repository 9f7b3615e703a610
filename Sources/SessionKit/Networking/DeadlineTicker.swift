import Dispatch

/// The wall-clock deadlines of HTTP exchanges, enforced by SessionKit rather than left to `URLSession`, behind one
/// timer: while any deadline is registered it wakes every ``resolution`` and fires those that have passed; with
/// none it does not run at all.
///
/// FoundationNetworking (Linux) does not enforce `timeoutIntervalForResource`, and `timeoutIntervalForRequest` is
/// an idle timeout: a server that sends one byte a second holds a request for as long as it likes. ``TaskBridge``
/// registers each exchange that has a deadline; when it passes before the exchange is answered, the ticker runs
/// its `expire` (``RequestHandle/expire(in:)``: the exchange is cancelled the way that cannot race its completion and
/// marked expired, so that the cancellation it then reports reads as a timeout).
///
/// It measures real time on the system's monotonic clock, never an injected ``SessionClock``: a test that moves
/// a manual clock by an hour must not end the requests in flight, and a real server is just as slow whatever
/// the test's clock says. A deadline fires at most ``resolution`` late.
///
/// Registering and removing a deadline costs a lock and a dictionary update, so a request pays no timer of its
/// own (creating, arming and cancelling a `DispatchSourceTimer` per request woke the dispatch manager thread
/// twice per request and cost about 2 % of a loopback request's throughput), and no object of its own either.
final class DeadlineTicker: Sendable {
    /// How late a deadline may fire.
    static let resolution = Duration.milliseconds(100)
    static let shared = DeadlineTicker()

    private struct State {
        var entries: [UInt64: (deadline: ContinuousClock.Instant, expire: @Sendable () -> Void)] = [:]
        var nextID: UInt64 = 0
        var ticking = false
    }

    private let state = Lock(State())
    private let queue = DispatchQueue(label: "SessionKit.DeadlineTicker")

    /// Registers `expire` to run once, when `duration` from now has passed, unless ``remove(_:)`` comes first.
    ///
    /// - Parameters:
    ///   - duration: How long the exchange may take from now.
    ///   - expire: What to run then: cancel the exchange. It runs on a background queue and must not block; it may
    ///     still run when ``remove(_:)`` races it, so it must be harmless once the exchange has its answer.
    /// - Returns: The key for ``remove(_:)``.
    func add(after duration: Duration, _ expire: @escaping @Sendable () -> Void) -> UInt64 {
        let deadline = ContinuousClock.now.advanced(by: min(max(duration, .zero), .seconds(3_155_760_000)))
        let (id, start) = state.withLock { state -> (UInt64, Bool) in
            state.nextID &+= 1
            state.entries[state.nextID] = (deadline, expire)
            defer { state.ticking = true }
            return (state.nextID, !state.ticking)
        }
        if start { scheduleTick() }
        return id
    }

    /// Forgets a deadline once its exchange has its answer; does nothing if it fired or was removed already.
    func remove(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    private func scheduleTick() {
        let (seconds, attoseconds) = Self.resolution.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in tick() }
    }

    private func tick() {
        let now = ContinuousClock.now
        let (due, again) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
            var due: [@Sendable () -> Void] = []
            for (id, entry) in state.entries where entry.deadline <= now {
                due.append(entry.expire)
                state.entries[id] = nil
            }
            // Stops when nothing is left; the next `add` starts it again.
            state.ticking = !state.entries.isEmpty
            return (due, state.ticking)
        }
        if again { scheduleTick() }
        for expire in due { expire() }
    }
}
