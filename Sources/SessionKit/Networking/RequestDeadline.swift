import Dispatch

/// A wall-clock deadline on one HTTP exchange, enforced by SessionKit rather than left to `URLSession`.
///
/// FoundationNetworking (Linux) does not enforce `timeoutIntervalForResource`, and `timeoutIntervalForRequest` is
/// an idle timeout: a server that sends one byte a second holds a request for as long as it likes. A deadline
/// registers the exchange with ``DeadlineTicker``; when the deadline passes before ``cancel()``, the ticker runs
/// `expire` (which cancels the exchange, through its session's delegate queue) and ``hasExpired`` becomes `true`,
/// so that the cancellation the exchange then reports can be told apart from the caller's and read as a timeout.
///
/// It measures real time on the system's monotonic clock, never an injected ``SessionClock``: a test that moves
/// a manual clock by an hour must not end the requests in flight, and a real server is just as slow whatever
/// the test's clock says. It fires at most ``DeadlineTicker/resolution`` late.
///
/// - Important: Call ``cancel()`` once the exchange has an answer, so the ticker forgets it.
final class RequestDeadline: Sendable {
    private let id: UInt64
    private let flag: Flag
    /// Whether the ticker has forgotten this deadline (``cancel()`` ran), so that `deinit` does not ask it again.
    private let removed = Lock(false)

    /// Starts the deadline.
    ///
    /// - Parameters:
    ///   - duration: How long the exchange may take from now.
    ///   - expire: What to run if the deadline passes before ``cancel()``: cancel the exchange. It runs once, on
    ///     a background queue, and must not block.
    init(after duration: Duration, expire: @escaping @Sendable () -> Void) {
        let deadline = ContinuousClock.now.advanced(by: min(max(duration, .zero), .seconds(3_155_760_000)))
        // The ticker holds `expire` and the flag, not this object, so a deadline released without `cancel()` is
        // still forgotten, in `deinit`.
        let flag = Flag()
        id = DeadlineTicker.shared.add(deadline) {
            let alreadyFired = flag.value.withLock { fired in
                defer { fired = true }
                return fired
            }
            guard !alreadyFired else { return }
            expire()
        }
        self.flag = flag
    }

    /// Whether the deadline passed before ``cancel()``, and the exchange was cancelled for it.
    var hasExpired: Bool { flag.value.withLock { $0 } }

    /// Stops the deadline; `expire` will not run if it has not already. Idempotent.
    func cancel() {
        let alreadyRemoved = removed.withLock { removed in
            defer { removed = true }
            return removed
        }
        guard !alreadyRemoved else { return }
        DeadlineTicker.shared.remove(id)
    }

    deinit {
        // Once per deadline: `cancel()`, the usual path, already took it off the ticker.
        if !removed.withLock({ $0 }) { DeadlineTicker.shared.remove(id) }
    }

    /// Whether the deadline fired, shared with the ticker's thread.
    private final class Flag: Sendable {
        let value = Lock<Bool>(false)
    }
}

/// The one timer behind every ``RequestDeadline``: while any deadline is registered it wakes every
/// ``resolution`` and fires those that have passed; with none it does not run at all.
///
/// Registering and removing a deadline costs a lock and a dictionary update, so a request pays no timer of its
/// own (creating, arming and cancelling a `DispatchSourceTimer` per request woke the dispatch manager thread
/// twice per request and cost about 2 % of a loopback request's throughput).
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

    /// Registers `expire` to run once `deadline` has passed.
    ///
    /// - Returns: The key for ``remove(_:)``.
    func add(_ deadline: ContinuousClock.Instant, _ expire: @escaping @Sendable () -> Void) -> UInt64 {
        let (id, start) = state.withLock { state -> (UInt64, Bool) in
            state.nextID &+= 1
            state.entries[state.nextID] = (deadline, expire)
            defer { state.ticking = true }
            return (state.nextID, !state.ticking)
        }
        if start { scheduleTick() }
        return id
    }

    /// Forgets a deadline; does nothing if it fired or was removed already.
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
